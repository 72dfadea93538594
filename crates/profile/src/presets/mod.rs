//! Built-in presets: TOML files under `src/profile/presets/`, each documenting
//! where its numbers come from.

/// Preset names, in listing order.
pub const NAMES: &[&str] = &[
    "intel-x25m-g1",
    "intel-x25m-g2",
    "samsung-pb22j",
    "ocz-core-v2",
    "solidata-k5-64",
    "mtron-mobi-3500",
    "crucial-m4-128",
    "intel-320-120",
    "intel-510-120",
    "ocz-vertex3-120",
    "nvme-tlc-slc-cache",
    "samsung-870qvo-1tb",
    "wd-blue-1tb-sata",
    "wd-sn580-1tb",
    "samsung-980pro-1tb",
    "sata-slc-2009",
    "sata-mlc-2009",
    "sata-mlc-2011",
    "nvme-tlc",
    "instant",
];

/// The TOML text of a preset, if `name` is one.
pub fn get(name: &str) -> Option<&'static str> {
    Some(match name {
        "intel-x25m-g1" => include_str!("intel-x25m-g1.toml"),
        "intel-x25m-g2" => include_str!("intel-x25m-g2.toml"),
        "samsung-pb22j" => include_str!("samsung-pb22j.toml"),
        "ocz-core-v2" => include_str!("ocz-core-v2.toml"),
        "solidata-k5-64" => include_str!("solidata-k5-64.toml"),
        "mtron-mobi-3500" => include_str!("mtron-mobi-3500.toml"),
        "crucial-m4-128" => include_str!("crucial-m4-128.toml"),
        "intel-320-120" => include_str!("intel-320-120.toml"),
        "intel-510-120" => include_str!("intel-510-120.toml"),
        "ocz-vertex3-120" => include_str!("ocz-vertex3-120.toml"),
        "nvme-tlc-slc-cache" => include_str!("nvme-tlc-slc-cache.toml"),
        "samsung-870qvo-1tb" => include_str!("samsung-870qvo-1tb.toml"),
        "wd-blue-1tb-sata" => include_str!("wd-blue-1tb-sata.toml"),
        "wd-sn580-1tb" => include_str!("wd-sn580-1tb.toml"),
        "samsung-980pro-1tb" => include_str!("samsung-980pro-1tb.toml"),
        "sata-slc-2009" => include_str!("sata-slc-2009.toml"),
        "sata-mlc-2009" => include_str!("sata-mlc-2009.toml"),
        "sata-mlc-2011" => include_str!("sata-mlc-2011.toml"),
        "nvme-tlc" => include_str!("nvme-tlc.toml"),
        "instant" => include_str!("instant.toml"),
        _ => return None,
    })
}

/// The preset name closest to `name`, if it is close enough to be a typo.
pub fn closest(name: &str) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    NAMES
        .iter()
        .map(|&n| (strsim::jaro_winkler(&name, n), n))
        .filter(|&(score, _)| score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(closest("sata-mlc-201"), Some("sata-mlc-2011"));
        assert_eq!(closest("SATA-SLC-2009"), Some("sata-slc-2009"));
        assert_eq!(closest("nvme"), Some("nvme-tlc"));
        assert_eq!(closest("instnat"), Some("instant"));
        assert_eq!(closest("nope"), None);
        assert_eq!(closest("/tmp/my-drive.toml"), None);
    }
}
