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
