//! The `ctl smart` text, in smartctl's layout.

use std::fmt::Write as _;

use vssd_profile::size::format_size;

/// The `ctl smart` text: an information header, then the attributes in
/// `smartctl -A` style (or the NVMe health log fields as `smartctl -a`
/// prints them).
pub fn smart(r: &vssd_device::smart::SmartReport) -> String {
    let mut o = String::new();
    let id = &r.identity;
    let nvme = r.nvme.is_some();
    let mut field = |label: &str, v: &str| {
        let _ = writeln!(o, "{:<18}{v}", format!("{label}:"));
    };
    field(
        if nvme { "Model Number" } else { "Device Model" },
        &id.model,
    );
    field("Serial Number", &id.serial);
    if let Some(w) = id.wwn {
        let h = format!("{w:016x}");
        field(
            "LU WWN Device Id",
            &format!("{} {} {}", &h[..1], &h[1..7], &h[7..]),
        );
    }
    field("Firmware Version", &id.firmware);
    field(
        "SMART set",
        &format!(
            "{} (computed by vssd from the drive model's counters)",
            r.set.name()
        ),
    );
    o.push('\n');
    if let Some(n) = &r.nvme {
        let _ = writeln!(o, "SMART/Health Information (NVMe Log 0x02)");
        let used = n
            .percentage_used
            .map(|p| format!("{p}%"))
            .unwrap_or_else(|| "- (no rated P/E cycles in the profile)".into());
        let _ = writeln!(o, "Percentage Used:                    {used}");
        let du = |u: u64| format!("{} [{}]", group(u), format_size(u * 512_000));
        let _ = writeln!(
            o,
            "Data Units Read:                    {}",
            du(n.data_units_read)
        );
        let _ = writeln!(
            o,
            "Data Units Written:                 {}",
            du(n.data_units_written)
        );
        let _ = writeln!(
            o,
            "Host Read Commands:                 {}",
            group(n.host_read_commands)
        );
        let _ = writeln!(
            o,
            "Host Write Commands:                {}",
            group(n.host_write_commands)
        );
        let _ = writeln!(o, "Media and Data Integrity Errors:    {}", n.media_errors);
        if let Some(k) = n.composite_temperature_k {
            let _ = writeln!(
                o,
                "Temperature:                        {} Celsius{}",
                k as i32 - 273,
                if n.temperature_warning {
                    " (over the warning threshold)"
                } else {
                    ""
                }
            );
            let _ = writeln!(
                o,
                "Warning  Comp. Temperature Time:    {}",
                n.warning_temp_minutes
            );
            let _ = writeln!(
                o,
                "Critical Comp. Temperature Time:    {}",
                n.critical_temp_minutes
            );
            let _ = writeln!(
                o,
                "Thermal Temp. 1 Transition Count:   {}",
                n.tmt1_transitions
            );
            let _ = writeln!(
                o,
                "Thermal Temp. 2 Transition Count:   {}",
                n.tmt2_transitions
            );
            let _ = writeln!(o, "Thermal Temp. 1 Total Time:         {}", n.tmt1_seconds);
            let _ = writeln!(o, "Thermal Temp. 2 Total Time:         {}", n.tmt2_seconds);
        }
        return o;
    }
    let _ = writeln!(o, "ID# ATTRIBUTE_NAME            VALUE WORST RAW_VALUE");
    for a in &r.attributes {
        let v = a
            .value
            .map(|v| format!("{v:03}"))
            .unwrap_or_else(|| "---".into());
        let _ = writeln!(o, "{:>3} {:<25} {v:>5} {v:>5} {}", a.id, a.name, a.raw_text);
    }
    // A drive counts erases in whole numbers; `ctl stats` has the mean
    // the raw values are taken from, with its decimals.
    let rounded: Vec<String> = r
        .attributes
        .iter()
        .filter(|a| a.from.contains("rounded down"))
        .map(|a| a.id.to_string())
        .collect();
    if !rounded.is_empty() {
        let _ = writeln!(
            o,
            "\nraw erase counts ({}): the mean erase count rounded down, as a drive's integer \
             counter holds it (`vssd ctl stats` gives it with its decimals)",
            rounded.join(", ")
        );
    }
    if let Some(p) = r.percent_used {
        let _ = writeln!(
            o,
            "\nrated life used: {p:.2} % (mean erase count over the rated P/E cycles)"
        );
    }
    o
}

/// `1234567` as `1,234,567` (smartctl's digit grouping).
fn group(v: u64) -> String {
    let d = v.to_string();
    let mut out = String::new();
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
