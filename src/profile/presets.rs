//! Built-in presets: TOML files under `src/profile/presets/`, each documenting
//! where its numbers come from.

/// Preset names, in listing order.
pub const NAMES: &[&str] = &[
    "sata-slc-2009",
    "sata-mlc-2009",
    "sata-mlc-2011",
    "nvme-tlc",
    "instant",
];

/// The TOML text of a preset, if `name` is one.
pub fn get(name: &str) -> Option<&'static str> {
    Some(match name {
        "sata-slc-2009" => include_str!("presets/sata-slc-2009.toml"),
        "sata-mlc-2009" => include_str!("presets/sata-mlc-2009.toml"),
        "sata-mlc-2011" => include_str!("presets/sata-mlc-2011.toml"),
        "nvme-tlc" => include_str!("presets/nvme-tlc.toml"),
        "instant" => include_str!("presets/instant.toml"),
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
