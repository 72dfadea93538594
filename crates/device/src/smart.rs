//! Host-side SMART: the drive's health in the attribute set its controller
//! family reported (`[identity] smart`), computed from the model's
//! counters (`vssd ctl smart`, the Prometheus endpoint).
//!
//! Only what the model computes is shown: host and NAND traffic, erase
//! counts, wear against the rated P/E cycles (`[wear] rated_pe_cycles`;
//! without it the life attributes are left out), and what injected faults
//! did ([`Errors`]): grown bad blocks, uncorrectable reads, power cuts
//! (unsafe shutdowns), where the family's attribute set counts them.
//! Program and erase failures are not told apart (both show as grown bad
//! blocks); life-curve throttling and power-on time are not modelled and
//! not shown. The temperature is the thermal model's (`[thermal]`, only
//! where the profile has one): attribute 194 in the ATA sets, the
//! composite temperature and the thermal-management counts and times in
//! the NVMe health log.

use serde::{Deserialize, Serialize};
use vssd_model::Counters;
use vssd_profile::{Identity, Profile, SmartSet};

/// One ATA SMART attribute.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attribute {
    /// Attribute ID (smartctl prints it in decimal; vendors' documents in hex).
    pub id: u8,
    /// smartctl-style name.
    pub name: String,
    /// Normalised value (100 = new, lower = worse), where the drive defines one.
    pub value: Option<u8>,
    /// Raw value.
    pub raw: u64,
    /// The raw value as the drive formats it (`avg/max` for packed ones).
    pub raw_text: String,
    /// Which counters it comes from.
    pub from: String,
}

/// The NVMe SMART / Health Information log fields vssd computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmeHealth {
    /// Percentage used: mean erase count over the rated P/E cycles, in
    /// whole percent, capped at 255 (the field may exceed 100). `None`
    /// without rated cycles.
    pub percentage_used: Option<u8>,
    /// Data units read: thousands of 512-byte units, rounded up.
    pub data_units_read: u64,
    /// Data units written: thousands of 512-byte units, rounded up.
    pub data_units_written: u64,
    /// Host read commands.
    pub host_read_commands: u64,
    /// Host write commands.
    pub host_write_commands: u64,
    /// Media and data integrity errors: uncorrectable reads (media-wear).
    pub media_errors: u64,
    /// Available spare, percent: spare blocks left of those the drive had
    /// before grown bad blocks.
    #[serde(default = "hundred")]
    pub available_spare: u8,
    /// Unsafe shutdowns: power cuts.
    #[serde(default)]
    pub unsafe_shutdowns: u64,
    /// Composite temperature, kelvin (the thermal model's; absent without
    /// `[thermal]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composite_temperature_k: Option<u16>,
    /// Critical warning bit 1: the temperature is at or above the warning
    /// threshold (`thermal.warning_c`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub temperature_warning: bool,
    /// Warning composite temperature time, minutes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub warning_temp_minutes: u64,
    /// Critical composite temperature time, minutes.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub critical_temp_minutes: u64,
    /// Thermal management temperature 1 (light throttling) transition count.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tmt1_transitions: u64,
    /// Thermal management temperature 2 (heavier steps) transition count.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tmt2_transitions: u64,
    /// Total time at thermal management temperature 1, seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tmt1_seconds: u64,
    /// Total time at thermal management temperature 2, seconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tmt2_seconds: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn hundred() -> u8 {
    100
}

/// What faults did, for the attributes that count it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Errors {
    /// Reads the media-wear model failed.
    pub uncorrectable_reads: u64,
    /// Power cuts (unsafe shutdowns).
    pub power_cuts: u64,
    /// Spare blocks left, percent of the drive's own.
    pub spare_percent: f64,
}

/// `vssd ctl smart`'s result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SmartReport {
    /// What the drive reports about itself (model, serial, firmware).
    pub identity: Identity,
    /// The attribute set.
    pub set: SmartSet,
    /// Mean erase count over the rated cycles, percent (may exceed 100);
    /// `None` without `[wear] rated_pe_cycles`.
    pub percent_used: Option<f64>,
    /// ATA attributes (empty for NVMe).
    pub attributes: Vec<Attribute>,
    /// NVMe health log (NVMe sets only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvme: Option<NvmeHealth>,
}

const MIB32: u64 = 32 << 20;
const GIB: u64 = 1 << 30;

/// Normalised "life left": 100 new, one point less per percent of rated
/// life used, never below `floor`.
fn life(percent_used: f64, floor: u8) -> u8 {
    let left = 100.0 - percent_used.floor();
    left.clamp(floor as f64, 100.0) as u8
}

struct Builder(Vec<Attribute>);

impl Builder {
    fn add(&mut self, id: u8, name: &str, value: Option<u8>, raw: u64, from: &str) {
        self.0.push(Attribute {
            id,
            name: name.into(),
            value,
            raw,
            raw_text: raw.to_string(),
            from: from.into(),
        });
    }
}

/// The SMART view of a drive of `profile` whose counters are `c`, with no
/// faults injected.
pub fn report(profile: &Profile, c: &Counters) -> SmartReport {
    report_with(
        profile,
        c,
        &Errors {
            spare_percent: 100.0,
            ..Errors::default()
        },
    )
}

/// The SMART view of a drive of `profile` whose counters are `c` and to
/// which faults did `e`.
pub fn report_with(profile: &Profile, c: &Counters, e: &Errors) -> SmartReport {
    let identity = profile.identity();
    let set = identity.smart;
    let rated = profile.wear.rated_pe_cycles;
    let v = Values {
        c,
        e,
        rated,
        pct: (rated > 0).then(|| c.erase_count_avg / rated as f64 * 100.0),
        avg: c.erase_count_avg.floor() as u64,
    };
    let mut b = Builder(Vec::new());
    let mut nvme = None;
    if let Some(t) = c.temperature_c
        && set != SmartSet::Nvme
    {
        // smartctl's 194: the raw value in °C, normalised 100 − °C (as
        // WD's SATA drives report it; sets without a temperature
        // attribute of their own get it too).
        let raw = t.round().clamp(0.0, 255.0) as u64;
        let value = (100.0 - t.round()).clamp(1.0, 100.0) as u8;
        b.add(194, "Temperature_Celsius", Some(value), raw, TEMP);
    }
    match set {
        SmartSet::Intel => intel(&mut b, &v),
        SmartSet::Marvell => marvell(&mut b, &v),
        SmartSet::Sandforce => sandforce(&mut b, &v),
        SmartSet::Indilinx => indilinx(&mut b, &v),
        SmartSet::Jmicron => jmicron(&mut b, &v),
        SmartSet::Samsung => samsung(&mut b, &v),
        SmartSet::Generic => generic(&mut b, &v),
        SmartSet::Nvme => nvme = Some(nvme_health(&v, profile.thermal.warning_c)),
    }
    // In ID order, as smartctl lists them.
    b.0.sort_by_key(|a| a.id);
    SmartReport {
        identity,
        set,
        percent_used: v.pct,
        attributes: b.0,
        nvme,
    }
}

/// What every attribute set computes from.
struct Values<'a> {
    c: &'a Counters,
    e: &'a Errors,
    /// Rated P/E cycles (0: none).
    rated: u32,
    /// Mean erase count over the rated cycles, percent.
    pct: Option<f64>,
    /// Mean erase count as the drive's integer counter has it (rounded
    /// down, as firmware's integer division does; `ctl stats` shows the
    /// exact mean).
    avg: u64,
}

const GROWN: &str = "grown_bad_blocks";
const UNC: &str = "faults.uncorrectable_reads (media-wear)";
const CUTS: &str = "power cuts (ctl power-cut)";
const HW: &str = "host_written_bytes";
const HR: &str = "host_read_bytes";
const WEAR: &str = "erase_count_avg / wear.rated_pe_cycles";
const AVG: &str = "erase_count_avg, rounded down (the drive's integer counter)";
const TEMP: &str = "temperature_c (the thermal model, [thermal])";

/// Intel SSD 320 product specification: 05h re-allocated (retired)
/// block count, BBh uncorrectable errors, C0h unsafe shutdowns.
fn intel(b: &mut Builder, v: &Values<'_>) {
    let (c, e) = (v.c, v.e);
    b.add(
        5,
        "Reallocated_Sector_Ct",
        Some(100),
        c.grown_bad_blocks,
        GROWN,
    );
    b.add(
        187,
        "Uncorrectable_Error_Cnt",
        Some(100),
        e.uncorrectable_reads,
        UNC,
    );
    b.add(192, "Unsafe_Shutdown_Count", Some(100), e.power_cuts, CUTS);
    b.add(
        225,
        "Host_Writes_32MiB",
        Some(100),
        c.host_written_bytes / MIB32,
        HW,
    );
    if let Some(p) = v.pct {
        b.add(233, "Media_Wearout_Indicator", Some(life(p, 1)), 0, WEAR);
    }
    b.add(
        241,
        "Host_Writes_32MiB",
        Some(100),
        c.host_written_bytes / MIB32,
        HW,
    );
    b.add(
        242,
        "Host_Reads_32MiB",
        Some(100),
        c.host_read_bytes / MIB32,
        HR,
    );
}

fn marvell(b: &mut Builder, v: &Values<'_>) {
    let (c, e) = (v.c, v.e);
    const BOTH: &str = "none (program and erase failures are counted in 170)";
    b.add(
        170,
        "Grown_Failing_Block_Ct",
        Some(100),
        c.grown_bad_blocks,
        GROWN,
    );
    b.add(171, "Program_Fail_Count", Some(100), 0, BOTH);
    b.add(172, "Erase_Fail_Count", Some(100), 0, BOTH);
    b.add(174, "Unexpect_Power_Loss_Ct", Some(100), e.power_cuts, CUTS);
    b.add(
        187,
        "Reported_Uncorrect",
        Some(100),
        e.uncorrectable_reads,
        UNC,
    );
    let value = v.pct.map(|p| life(p, 0)).or(Some(100));
    b.add(173, "Wear_Leveling_Count", value, v.avg, AVG);
    if let Some(p) = v.pct {
        let used = p.floor().min(u64::MAX as f64) as u64;
        b.add(202, "Percent_Lifetime_Used", Some(life(p, 0)), used, WEAR);
    }
    b.add(
        246,
        "Total_LBAs_Written",
        Some(100),
        c.host_written_bytes / 512,
        HW,
    );
}

fn sandforce(b: &mut Builder, v: &Values<'_>) {
    let (c, e) = (v.c, v.e);
    b.add(
        5,
        "Retired_Block_Count",
        Some(100),
        c.grown_bad_blocks,
        GROWN,
    );
    b.add(174, "Unexpect_Power_Loss_Ct", Some(100), e.power_cuts, CUTS);
    b.add(
        187,
        "Reported_Uncorrect",
        Some(100),
        e.uncorrectable_reads,
        UNC,
    );
    b.add(
        230,
        "Life_Curve_Status",
        Some(100),
        100,
        "none (no life-curve throttling modelled)",
    );
    if let Some(p) = v.pct {
        let l = life(p, 0);
        b.add(231, "SSD_Life_Left", Some(l), l as u64, WEAR);
    }
    let nand = c.nand_bytes_programmed / GIB;
    b.add(
        233,
        "NAND_Writes_GiB",
        Some(100),
        nand,
        "nand_bytes_programmed",
    );
    b.add(
        234,
        "Host_Writes_GiB",
        Some(100),
        c.host_written_bytes / GIB,
        HW,
    );
    b.add(
        241,
        "Lifetime_Writes_GiB",
        Some(100),
        c.host_written_bytes / GIB,
        HW,
    );
    b.add(
        242,
        "Lifetime_Reads_GiB",
        Some(100),
        c.host_read_bytes / GIB,
        HR,
    );
}

fn indilinx(b: &mut Builder, v: &Values<'_>) {
    let c = v.c;
    b.add(
        198,
        "Read_Sectors_Tot_Ct",
        None,
        c.host_read_bytes / 512,
        HR,
    );
    b.add(
        199,
        "Write_Sectors_Tot_Ct",
        None,
        c.host_written_bytes / 512,
        HW,
    );
    b.add(
        200,
        "Read_Commands_Tot_Ct",
        None,
        c.host_read_cmds,
        "host_read_cmds",
    );
    b.add(
        201,
        "Write_Commands_Tot_Ct",
        None,
        c.host_write_cmds,
        "host_write_cmds",
    );
    if v.rated > 0 {
        b.add(
            205,
            "Max_PE_Count_Spec",
            None,
            v.rated as u64,
            "wear.rated_pe_cycles",
        );
    }
    b.add(
        206,
        "Min_Erase_Count",
        None,
        c.erase_count_min as u64,
        "erase_count_min",
    );
    b.add(
        207,
        "Max_Erase_Count",
        None,
        c.erase_count_max as u64,
        "erase_count_max",
    );
    b.add(208, "Average_Erase_Count", None, v.avg, AVG);
    if let Some(p) = v.pct {
        b.add(
            209,
            "Remaining_Lifetime_Perc",
            None,
            life(p, 0) as u64,
            WEAR,
        );
    }
}

fn jmicron(b: &mut Builder, v: &Values<'_>) {
    let (avg, max) = (v.avg, v.c.erase_count_max as u64);
    b.0.push(Attribute {
        id: 234,
        name: "Avg/Max_Erase_Count".into(),
        value: Some(100),
        raw: avg | (max << 24),
        raw_text: format!("{avg}/{max}"),
        from: "erase_count_avg (rounded down), erase_count_max".into(),
    });
}

fn samsung(b: &mut Builder, v: &Values<'_>) {
    let c = v.c;
    let value = v.pct.map(|p| life(p, 0)).or(Some(100));
    b.add(177, "Wear_Leveling_Count", value, v.avg, AVG);
    b.add(
        241,
        "Total_LBAs_Written",
        Some(100),
        c.host_written_bytes / 512,
        HW,
    );
    b.add(
        242,
        "Total_LBAs_Read",
        Some(100),
        c.host_read_bytes / 512,
        HR,
    );
}

fn generic(b: &mut Builder, v: &Values<'_>) {
    let c = v.c;
    let value = v.pct.map(|p| life(p, 0)).or(Some(100));
    b.add(173, "Wear_Leveling_Count", value, v.avg, AVG);
    if let Some(p) = v.pct {
        let l = life(p, 0);
        b.add(231, "SSD_Life_Left", Some(l), l as u64, WEAR);
    }
    b.add(
        241,
        "Total_LBAs_Written",
        Some(100),
        c.host_written_bytes / 512,
        HW,
    );
    b.add(
        242,
        "Total_LBAs_Read",
        Some(100),
        c.host_read_bytes / 512,
        HR,
    );
}

fn nvme_health(v: &Values<'_>, warning_c: f64) -> NvmeHealth {
    let (c, e) = (v.c, v.e);
    let units = |bytes: u64| (bytes / 512).div_ceil(1000);
    let ns = 1_000_000_000;
    NvmeHealth {
        composite_temperature_k: c
            .temperature_c
            .map(|t| (t + 273.15).round().clamp(0.0, 65535.0) as u16),
        temperature_warning: warning_c > 0.0 && c.temperature_c.is_some_and(|t| t >= warning_c),
        warning_temp_minutes: c.warning_temp_ns / (60 * ns),
        critical_temp_minutes: c.critical_temp_ns / (60 * ns),
        tmt1_transitions: c.throttle1_entries,
        tmt2_transitions: c.throttle2_entries,
        tmt1_seconds: c.throttle1_ns / ns,
        tmt2_seconds: c.throttle2_ns / ns,
        percentage_used: v.pct.map(|p| p.floor().min(255.0) as u8),
        data_units_read: units(c.host_read_bytes),
        data_units_written: units(c.host_written_bytes),
        host_read_commands: c.host_read_cmds,
        host_write_commands: c.host_write_cmds,
        media_errors: e.uncorrectable_reads,
        available_spare: e.spare_percent.clamp(0.0, 100.0).floor() as u8,
        unsafe_shutdowns: e.power_cuts,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn counters() -> Counters {
        Counters {
            host_read_bytes: 3 * GIB + 5,
            host_written_bytes: 10 * GIB + 1,
            host_read_cmds: 1234,
            host_write_cmds: 5678,
            nand_bytes_programmed: 7 * GIB,
            erase_count_min: 40,
            erase_count_avg: 150.7,
            erase_count_max: 300,
            ..Counters::default()
        }
    }

    fn attr(r: &SmartReport, id: u8) -> &Attribute {
        r.attributes
            .iter()
            .find(|a| a.id == id)
            .unwrap_or_else(|| panic!("no attribute {id} in {r:?}"))
    }

    #[test]
    fn intel_host_writes_and_wearout_come_from_the_counters() {
        let p = Profile::load("intel-x25m-g2").unwrap(); // 5,000 rated cycles
        let r = report(&p, &counters());
        assert_eq!(attr(&r, 225).raw, 10 * GIB / (32 << 20));
        assert_eq!(attr(&r, 241).raw, 320);
        assert_eq!(attr(&r, 242).raw, 96);
        // 150.7 / 5000 = 3.01 % used -> 97.
        assert_eq!(attr(&r, 233).value, Some(97));
        assert!((r.percent_used.unwrap() - 3.014).abs() < 1e-9);
        // Worn out past the rating: Intel's indicator stops at 1.
        let worn = Counters {
            erase_count_avg: 6000.0,
            ..counters()
        };
        assert_eq!(attr(&report(&p, &worn), 233).value, Some(1));
    }

    #[test]
    fn marvell_reports_the_average_erase_count_and_lbas() {
        let p = Profile::load("crucial-m4-128").unwrap(); // 3,000 rated cycles
        let r = report(&p, &counters());
        assert_eq!(attr(&r, 173).raw, 150);
        assert_eq!(attr(&r, 173).value, Some(95)); // 5.02 % used
        assert_eq!(attr(&r, 202).raw, 5);
        assert_eq!(attr(&r, 170).raw, 0);
        assert_eq!(attr(&r, 171).raw, 0);
        assert_eq!(attr(&r, 246).raw, (10 * GIB + 1) / 512);
        assert!(r.nvme.is_none());
    }

    #[test]
    fn sandforce_separates_nand_and_host_writes() {
        let p = Profile::load("ocz-vertex3-120").unwrap();
        let r = report(&p, &counters());
        assert_eq!(attr(&r, 233).raw, 7, "NAND GiB");
        assert_eq!(attr(&r, 234).raw, 10, "host GiB");
        assert_eq!(attr(&r, 241).raw, 10);
        assert_eq!(attr(&r, 242).raw, 3);
        assert_eq!(attr(&r, 231).value, Some(95));
        assert_eq!(attr(&r, 230).value, Some(100));
    }

    #[test]
    fn indilinx_jmicron_samsung_and_generic_sets() {
        let c = counters();
        let r = report(&Profile::load("solidata-k5-64").unwrap(), &c);
        assert_eq!(attr(&r, 199).raw, c.host_written_bytes / 512);
        assert_eq!(attr(&r, 200).raw, 1234);
        assert_eq!(attr(&r, 201).raw, 5678);
        assert_eq!(attr(&r, 206).raw, 40);
        assert_eq!(attr(&r, 207).raw, 300);
        assert_eq!(attr(&r, 208).raw, 150);
        // No rated cycles in this preset: no life attributes.
        assert!(r.attributes.iter().all(|a| a.id != 205 && a.id != 209));
        let r = report(&Profile::load("ocz-core-v2").unwrap(), &c);
        assert_eq!(attr(&r, 234).raw_text, "150/300");
        assert_eq!(attr(&r, 234).raw, 150 | (300 << 24));
        let r = report(&Profile::load("samsung-pb22j").unwrap(), &c);
        assert_eq!(attr(&r, 177).raw, 150);
        assert_eq!(attr(&r, 242).raw, c.host_read_bytes / 512);
        let r = report(&Profile::load("mtron-mobi-3500").unwrap(), &c);
        assert_eq!(r.set, SmartSet::Generic);
        assert_eq!(attr(&r, 241).raw, c.host_written_bytes / 512);
    }

    #[test]
    fn nvme_health_log_units_round_up() {
        let p = Profile::load("nvme-tlc-slc-cache").unwrap(); // 2,000 rated cycles
        let r = report(&p, &counters());
        let n = r.nvme.unwrap();
        assert!(r.attributes.is_empty());
        // 10 GiB + 1 byte = 20,971,520 whole sectors -> 20,972 units (rounded up).
        assert_eq!(n.data_units_written, 20_972);
        assert_eq!(n.data_units_read, (3 * GIB / 512).div_ceil(1000));
        assert_eq!(n.percentage_used, Some(7)); // 150.7 / 2000 = 7.5 %
        assert_eq!(n.host_read_commands, 1234);
        assert_eq!(n.media_errors, 0);
        let worn = Counters {
            erase_count_avg: 2000.0 * 3.0,
            ..counters()
        };
        assert_eq!(report(&p, &worn).nvme.unwrap().percentage_used, Some(255));
        // nvme-tlc has no rated cycles.
        let r = report(&Profile::load("nvme-tlc").unwrap(), &counters());
        assert_eq!(r.nvme.unwrap().percentage_used, None);
    }

    #[test]
    fn the_thermal_model_shows_in_the_health_log_and_attribute_194() {
        let hot = Counters {
            temperature_c: Some(83.4),
            throttle_level: 1,
            throttle1_entries: 3,
            throttle2_entries: 1,
            throttle1_ns: 125_900_000_000,
            throttle2_ns: 999_999_999,
            warning_temp_ns: 150 * 1_000_000_000,
            critical_temp_ns: 59 * 1_000_000_000,
            ..counters()
        };
        // WCTEMP 82 °C.
        let p = Profile::load("samsung-980pro-1tb").unwrap();
        let n = report(&p, &hot).nvme.unwrap();
        assert_eq!(n.composite_temperature_k, Some(357)); // 356.55 K
        assert!(n.temperature_warning);
        assert_eq!((n.warning_temp_minutes, n.critical_temp_minutes), (2, 0));
        assert_eq!((n.tmt1_transitions, n.tmt2_transitions), (3, 1));
        assert_eq!((n.tmt1_seconds, n.tmt2_seconds), (125, 0));
        let cool = Counters {
            temperature_c: Some(40.0),
            ..counters()
        };
        assert!(!report(&p, &cool).nvme.unwrap().temperature_warning);
        // No thermal model: no temperature, nothing in the log.
        let n = report(&p, &counters()).nvme.unwrap();
        assert_eq!(n.composite_temperature_k, None);
        assert!(!n.temperature_warning);
        // ATA: 194, raw °C, normalised 100 − °C; absent without the model.
        let p = Profile::load("wd-blue-1tb-sata").unwrap();
        let a = attr(&report(&p, &hot), 194).clone();
        assert_eq!((a.raw, a.value), (83, Some(17)));
        let r = report(&p, &counters());
        assert!(r.attributes.iter().all(|a| a.id != 194), "{r:?}");
    }
}
