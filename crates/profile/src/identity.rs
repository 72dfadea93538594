//! `[identity]`: what the drive says it is — model, serial number,
//! firmware revision, World Wide Name — and which SMART attribute set its
//! controller reports. The guest sees the strings through virtio-blk's
//! GET_ID (the serial) or through the QEMU device properties vssd prints
//! for the SATA and NVMe buses (`vssd qemu-args`).

use serde::{Deserialize, Serialize};

use crate::{Interface, Profile, ProfileError, invalid};

/// Longest model string: ATA IDENTIFY words 27-46, NVMe MN (40 bytes).
pub const MODEL_MAX: usize = 40;
/// Longest serial: ATA words 10-19, NVMe SN, virtio-blk GET_ID (20 bytes).
pub const SERIAL_MAX: usize = 20;
/// Longest firmware revision: ATA words 23-26, NVMe FR (8 bytes).
pub const FIRMWARE_MAX: usize = 8;

/// The SMART attribute set a controller family reports (`vssd ctl smart`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SmartSet {
    /// Intel's own firmware (X25-M, 320, 510): E1/F1/F2 host traffic in
    /// 32 MiB units, E9 media wearout indicator.
    Intel,
    /// Marvell-based Crucial/Micron (m4, C300): AA/AB failure counts, AD
    /// average erase count, CA percent of rated life used, F6 LBAs written.
    Marvell,
    /// SandForce SF-1200/SF-2200: E6 life curve, E7 life left, E9/EA NAND
    /// and host writes in GiB, F1/F2 host writes and reads in GiB.
    Sandforce,
    /// Indilinx Barefoot: C6-C9 sector and command totals, CD-D1 P/E
    /// ratings, erase counts, remaining life.
    Indilinx,
    /// JMicron JMF60x: EA average/maximum erase count.
    Jmicron,
    /// Samsung controllers: B1 wear levelling count, F1/F2 LBAs written and read.
    Samsung,
    /// Attributes most ATA drives of the era report: AD erase count, E7 life
    /// left (when the profile rates its cycles), F1/F2 LBAs written/read.
    Generic,
    /// NVMe SMART / Health Information log (log page 02h).
    Nvme,
}

impl SmartSet {
    /// The set's name as in TOML.
    pub fn name(self) -> &'static str {
        match self {
            SmartSet::Intel => "intel",
            SmartSet::Marvell => "marvell",
            SmartSet::Sandforce => "sandforce",
            SmartSet::Indilinx => "indilinx",
            SmartSet::Jmicron => "jmicron",
            SmartSet::Samsung => "samsung",
            SmartSet::Generic => "generic",
            SmartSet::Nvme => "nvme",
        }
    }
}

/// What a read of a trimmed (unmapped) LBA returns: ATA's DRAT / RZAT
/// bits (IDENTIFY word 69 bits 14 and 5), NVMe's DLFEAT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReadAfterTrim {
    /// Deterministic zeros (DRAT and RZAT; NVMe DLFEAT 001b).
    #[default]
    Zeros,
    /// A deterministic non-zero pattern (DRAT without RZAT; DLFEAT 010b):
    /// every byte 0xFF.
    Pattern,
    /// Not deterministic (neither bit): the old data, as several early
    /// drives returned until the flash was erased. vssd keeps it until the
    /// LBA is written again or the drive is secure-erased.
    OldData,
}

impl ReadAfterTrim {
    /// The byte a read of a trimmed LBA returns in `pattern` mode.
    pub const PATTERN_BYTE: u8 = 0xFF;

    /// The mode's name as in TOML.
    pub fn name(self) -> &'static str {
        match self {
            ReadAfterTrim::Zeros => "zeros",
            ReadAfterTrim::Pattern => "pattern",
            ReadAfterTrim::OldData => "old-data",
        }
    }
}

/// `[identity]` as written in a profile; empty fields take defaults (see
/// [`Profile::identity`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IdentitySpec {
    /// Model string (ATA model number, NVMe model number), at most 40 printable ASCII characters.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Serial number, at most 20 characters.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub serial: String,
    /// Firmware revision, at most 8 characters.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub firmware: String,
    /// World Wide Name (NAA 5: 0x5, 24-bit IEEE OUI, 36-bit unit number); 0 = none.
    #[serde(skip_serializing_if = "is_zero")]
    pub wwn: u64,
    /// SMART attribute set (default: `nvme` on PCIe interfaces, else `generic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smart: Option<SmartSet>,
    /// What reads of trimmed LBAs return (default `zeros`).
    #[serde(skip_serializing_if = "is_zeros")]
    pub read_after_trim: ReadAfterTrim,
    /// Where the strings come from (documentation).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub source: String,
}

fn is_zeros(v: &ReadAfterTrim) -> bool {
    *v == ReadAfterTrim::Zeros
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// The identity a drive presents, every field resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Model string.
    pub model: String,
    /// Serial number.
    pub serial: String,
    /// Firmware revision.
    pub firmware: String,
    /// World Wide Name, if the drive has one.
    pub wwn: Option<u64>,
    /// SMART attribute set.
    pub smart: SmartSet,
    /// What reads of trimmed LBAs return.
    #[serde(default)]
    pub read_after_trim: ReadAfterTrim,
}

/// FNV-1a, 64 bits: a stable hash for default serials (no dependency).
fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

impl Profile {
    /// The identity this drive presents: the `[identity]` fields, with
    /// defaults for those left empty — model `VSSD <name>`, a serial
    /// `VSSD` + 12 hex digits derived from the name and capacity (stable
    /// across restarts), firmware `VSSD` + the vssd version, no WWN.
    pub fn identity(&self) -> Identity {
        let s = &self.identity;
        let model = if s.model.is_empty() {
            let mut m = format!("VSSD {}", self.name);
            m.retain(|c| c.is_ascii_graphic() || c == ' ');
            m.truncate(MODEL_MAX);
            m
        } else {
            s.model.clone()
        };
        let serial = if s.serial.is_empty() {
            let h = fnv1a(&[
                self.name.as_bytes(),
                &self.geometry.exported_capacity.0.to_le_bytes(),
            ]);
            format!("VSSD{:012X}", h >> 16)
        } else {
            s.serial.clone()
        };
        let firmware = if s.firmware.is_empty() {
            let mut f = env!("CARGO_PKG_VERSION").replace('.', "");
            f.insert_str(0, "VSSD");
            f.truncate(FIRMWARE_MAX);
            f
        } else {
            s.firmware.clone()
        };
        let smart = s.smart.unwrap_or(if self.host.interface.is_pcie() {
            SmartSet::Nvme
        } else {
            SmartSet::Generic
        });
        Identity {
            model,
            serial,
            firmware,
            wwn: (s.wwn != 0).then_some(s.wwn),
            smart,
            read_after_trim: s.read_after_trim,
        }
    }
}

impl Profile {
    /// This profile with another serial number (two drives of one preset
    /// attached to one guest need distinct serials), checked like the
    /// profile's own.
    pub fn with_serial(mut self, serial: &str) -> Result<Profile, ProfileError> {
        check_text("--serial", "serial", serial, SERIAL_MAX)?;
        if serial.is_empty() {
            return Err(invalid("--serial", "serial", "\"\"", "a non-empty serial"));
        }
        self.identity.serial = serial.to_string();
        Ok(self)
    }
}

/// A value for a QEMU `-device`/`-blockdev` option list: commas doubled
/// (QEMU's escape for a comma inside a value).
pub fn qemu_opt_value(v: &str) -> String {
    v.replace(',', ",,")
}

impl Identity {
    /// The `ide-hd` properties that make QEMU's ATA IDENTIFY report this
    /// identity: `model=` (words 27-46), `serial=` (words 10-19), `ver=`
    /// (firmware revision, words 23-26) and, if the drive has one, `wwn=`
    /// (words 108-111).
    pub fn ide_hd_properties(&self) -> String {
        let mut p = format!(
            "model={},serial={},ver={}",
            qemu_opt_value(&self.model),
            qemu_opt_value(&self.serial),
            qemu_opt_value(&self.firmware)
        );
        if let Some(w) = self.wwn {
            p.push_str(&format!(",wwn={w:#018x}"));
        }
        p
    }

    /// The `nvme` properties for this identity. QEMU 7.2's NVMe controller
    /// takes only the serial number: its model number is always `QEMU NVMe
    /// Ctrl` and its firmware revision QEMU's version, whatever the profile
    /// says.
    pub fn nvme_properties(&self) -> String {
        format!("serial={}", qemu_opt_value(&self.serial))
    }
}

fn check_text(origin: &str, field: &str, v: &str, max: usize) -> Result<(), ProfileError> {
    if v.len() > max {
        return Err(invalid(
            origin,
            field,
            format!("{v:?}"),
            &format!("at most {max} characters"),
        ));
    }
    if !v.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
        return Err(invalid(
            origin,
            field,
            format!("{v:?}"),
            "printable ASCII only (the ATA and NVMe identify strings are ASCII)",
        ));
    }
    if v.starts_with(' ') || v.ends_with(' ') {
        return Err(invalid(
            origin,
            field,
            format!("{v:?}"),
            "no leading or trailing spaces (the drive pads with spaces itself)",
        ));
    }
    Ok(())
}

/// Check `[identity]`.
pub(crate) fn validate(p: &Profile, origin: &str) -> Result<(), ProfileError> {
    let s = &p.identity;
    check_text(origin, "identity.model", &s.model, MODEL_MAX)?;
    check_text(origin, "identity.serial", &s.serial, SERIAL_MAX)?;
    check_text(origin, "identity.firmware", &s.firmware, FIRMWARE_MAX)?;
    if s.wwn != 0 && s.wwn >> 60 != 5 {
        return Err(invalid(
            origin,
            "identity.wwn",
            format!("{:#x}", s.wwn),
            "an NAA 5 name: 0x5 followed by 15 hex digits (24-bit OUI, 36-bit unit), or 0 for none",
        ));
    }
    let pcie = p.host.interface.is_pcie();
    match s.smart {
        Some(SmartSet::Nvme) if !pcie => Err(invalid(
            origin,
            "identity.smart",
            "nvme",
            "only on a PCIe interface (pcie3-x4, pcie4-x4)",
        )),
        Some(set) if pcie && set != SmartSet::Nvme => Err(invalid(
            origin,
            "identity.smart",
            set.name(),
            "an NVMe drive reports the NVMe health log: use \"nvme\"",
        )),
        _ => Ok(()),
    }
}

impl Interface {
    /// Whether this is an NVMe (PCIe) link.
    pub fn is_pcie(self) -> bool {
        matches!(self, Interface::Pcie3x4 | Interface::Pcie4x4)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Profile, presets};

    #[test]
    fn every_preset_has_a_valid_identity_and_distinct_serials() {
        let mut serials = std::collections::HashSet::new();
        for name in presets::NAMES {
            let p = Profile::load(name).unwrap();
            let id = p.identity();
            assert!(!id.model.is_empty() && id.model.len() <= 40, "{name}");
            assert!(!id.serial.is_empty() && id.serial.len() <= 20, "{name}");
            assert!(!id.firmware.is_empty() && id.firmware.len() <= 8, "{name}");
            assert!(serials.insert(id.serial.clone()), "{name}: serial repeated");
        }
    }

    #[test]
    fn real_drive_strings_are_kept() {
        let id = Profile::load("intel-x25m-g2").unwrap().identity();
        assert_eq!(id.model, "INTEL SSDSA2M160G2GC");
        assert_eq!(id.firmware, "2CV102HD");
        assert_eq!(id.smart, super::SmartSet::Intel);
        let id = Profile::load("crucial-m4-128").unwrap().identity();
        assert_eq!(id.model, "M4-CT128M4SSD2");
        assert_eq!(id.firmware, "0009");
        let id = Profile::load("nvme-tlc").unwrap().identity();
        assert_eq!(id.smart, super::SmartSet::Nvme);
    }

    #[test]
    fn qemu_properties_carry_the_strings() {
        let id = Profile::load("intel-x25m-g2").unwrap().identity();
        assert_eq!(
            id.ide_hd_properties(),
            "model=INTEL SSDSA2M160G2GC,serial=CVPO935600AB160AGN,ver=2CV102HD,wwn=0x5001517959a1b2c3"
        );
        assert_eq!(id.nvme_properties(), "serial=CVPO935600AB160AGN");
        let mut q = id.clone();
        q.model = "A,B".into();
        q.wwn = None;
        assert_eq!(
            q.ide_hd_properties(),
            "model=A,,B,serial=CVPO935600AB160AGN,ver=2CV102HD"
        );
    }

    #[test]
    fn defaults_are_stable_and_bad_strings_are_refused() {
        let p = Profile::load("instant").unwrap();
        let mut q = p.clone();
        q.identity = Default::default();
        let a = q.identity();
        assert_eq!(a, q.clone().identity(), "deterministic");
        assert!(
            a.serial.starts_with("VSSD") && a.serial.len() == 16,
            "{a:?}"
        );
        assert!(a.model.starts_with("VSSD "), "{a:?}");
        let with = |f: &dyn Fn(&mut Profile)| {
            let mut r = p.clone();
            f(&mut r);
            Profile::from_toml(&r.to_toml(), "t.toml").map(|_| ())
        };
        let e = with(&|r| r.identity.serial = "X".repeat(21))
            .unwrap_err()
            .to_string();
        assert!(e.contains("identity.serial") && e.contains("20"), "{e}");
        let e = with(&|r| r.identity.model = "Ünicode".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("identity.model") && e.contains("ASCII"), "{e}");
        let e = with(&|r| r.identity.firmware = " 0009".into())
            .unwrap_err()
            .to_string();
        assert!(e.contains("identity.firmware"), "{e}");
        let e = with(&|r| r.identity.wwn = 0x1234).unwrap_err().to_string();
        assert!(e.contains("identity.wwn") && e.contains("NAA 5"), "{e}");
        let e = with(&|r| r.identity.smart = Some(super::SmartSet::Nvme))
            .unwrap_err()
            .to_string();
        assert!(e.contains("identity.smart"), "{e}");
        assert!(with(&|r| r.identity.wwn = 0x5001_5170_0000_0001).is_ok());
        let q = p.clone().with_serial("UNIT2").unwrap();
        assert_eq!(q.identity().serial, "UNIT2");
        assert!(p.clone().with_serial("").is_err());
        assert!(p.clone().with_serial(&"9".repeat(21)).is_err());
    }
}
