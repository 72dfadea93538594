#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a panic is a failure report
//! The workspace's layering, read from `cargo metadata`: each crate may
//! depend only on the vssd crates below it (docs/architecture.md), the
//! model stays pure, and the daemon builds without the kit.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Every vssd crate and the vssd crates it may use (normal dependencies).
/// A new crate must be added here, with its place in the layers.
const ALLOWED: &[(&str, &[&str])] = &[
    ("vssd-common", &[]),
    ("vssd-profile", &[]),
    ("vssd-trace", &["vssd-common", "vssd-profile"]),
    ("vssd-model", &["vssd-profile"]),
    ("vssd-qemu", &["vssd-profile"]),
    (
        "vssd-sim",
        &["vssd-common", "vssd-profile", "vssd-model", "vssd-trace"],
    ),
    (
        "vssd-device",
        &["vssd-common", "vssd-profile", "vssd-model", "vssd-trace"],
    ),
    (
        "vssd-frontend",
        &["vssd-common", "vssd-profile", "vssd-device"],
    ),
    (
        "vssd-ctl",
        &["vssd-common", "vssd-profile", "vssd-model", "vssd-device"],
    ),
    ("vssd-loadgen", &["vssd-common", "vssd-profile"]),
    ("vssd-chart", &["vssd-common"]),
    ("vssd-guest", &["vssd-profile", "vssd-ctl", "vssd-qemu"]),
    ("vssd-demo", &["vssd-common", "vssd-profile", "vssd-guest"]),
    (
        "vssd-bench",
        &[
            "vssd-common",
            "vssd-profile",
            "vssd-model",
            "vssd-sim",
            "vssd-device",
            "vssd-ctl",
            "vssd-trace",
            "vssd-guest",
            "vssd-chart",
        ],
    ),
    (
        "vssd-fidelity",
        &[
            "vssd-common",
            "vssd-profile",
            "vssd-model",
            "vssd-sim",
            "vssd-chart",
        ],
    ),
    (
        "vssd-fuzz",
        &[
            "vssd-ctl",
            "vssd-device",
            "vssd-fidelity",
            "vssd-frontend",
            "vssd-profile",
            "vssd-sim",
            "vssd-trace",
        ],
    ),
    (
        "vssd",
        &[
            "vssd-common",
            "vssd-profile",
            "vssd-model",
            "vssd-sim",
            "vssd-device",
            "vssd-frontend",
            "vssd-ctl",
            "vssd-loadgen",
            "vssd-trace",
            "vssd-qemu",
            "vssd-guest",
            "vssd-demo",
            "vssd-bench",
            "vssd-fidelity",
        ],
    ),
];

/// The kit: the crates `vssd` pulls in only with its feature `kit` (on by
/// default), which the daemon never needs (nor `vssd-chart`, which only
/// they use: no daemon crate reaches plotters).
const KIT: &[&str] = &["vssd-guest", "vssd-demo", "vssd-bench", "vssd-fidelity"];

/// Crates the pure model (and its profiles) must never reach, directly or
/// through another crate: no CLI, async runtime, charts, virtio, guest
/// memory, terminal or libc.
const NOT_IN_MODEL: &[&str] = &[
    "clap",
    "tokio",
    "plotters",
    "vhost",
    "vhost-user-backend",
    "vm-memory",
    "virtio-queue",
    "indicatif",
    "libc",
];

fn metadata(extra: &[&str]) -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // This host's dependencies only (vssd is Linux-only), from the local
    // registry cache the build filled.
    let host = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--offline"])
        .args(["--filter-platform", &host])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Each workspace package's normal (not dev or build) dependency names.
fn normal_deps(meta: &serde_json::Value) -> BTreeMap<String, BTreeSet<String>> {
    meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().unwrap().to_string())
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let deps = normal_deps(&metadata(&["--no-deps"]));
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    for (name, uses) in &deps {
        let Some(ok) = allowed.get(name.as_str()) else {
            panic!("crate {name} is not in tests/layers.rs: give it its place in the layers");
        };
        for d in uses.iter().filter(|d| d.starts_with("vssd")) {
            assert!(
                ok.contains(&d.as_str()),
                "{name} depends on {d}, which is not below it (allowed: {ok:?}); \
                 move the shared piece down instead"
            );
        }
    }
    assert_eq!(
        deps.len(),
        ALLOWED.len(),
        "a crate listed in tests/layers.rs is gone"
    );
}

/// The packages `root` reaches through normal dependencies (resolved for
/// the default features of the workspace).
fn reachable(meta: &serde_json::Value, root: &str) -> BTreeSet<String> {
    let nodes = meta["resolve"]["nodes"].as_array().unwrap();
    let name_of = |id: &str| -> String {
        meta["packages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["id"] == id)
            .map(|p| p["name"].as_str().unwrap().to_string())
            .unwrap_or_default()
    };
    let start = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == root)
        .map(|p| p["id"].as_str().unwrap().to_string())
        .unwrap();
    let mut seen = BTreeSet::new();
    let mut todo = vec![start];
    while let Some(id) = todo.pop() {
        if !seen.insert(id.clone()) {
            continue;
        }
        let node = nodes.iter().find(|n| n["id"] == id.as_str()).unwrap();
        for d in node["deps"].as_array().unwrap() {
            let normal = d["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                todo.push(d["pkg"].as_str().unwrap().to_string());
            }
        }
    }
    seen.iter().map(|id| name_of(id)).collect()
}

#[test]
fn the_model_is_pure_and_the_daemon_has_no_charts() {
    let meta = metadata(&[]);
    for root in ["vssd-model", "vssd-profile"] {
        let r = reachable(&meta, root);
        for bad in NOT_IN_MODEL {
            assert!(!r.contains(*bad), "{root} reaches {bad}: {r:?}");
        }
    }
    // The daemon's crates: nothing of the kit or its chart library.
    for root in [
        "vssd-device",
        "vssd-frontend",
        "vssd-ctl",
        "vssd-loadgen",
        "vssd-sim",
        "vssd-qemu",
    ] {
        let r = reachable(&meta, root);
        assert!(!r.contains("plotters"), "{root} reaches plotters");
        for kit in KIT {
            assert!(!r.contains(*kit), "{root} reaches the kit's {kit}");
        }
    }
    // And the kit is optional in the binary: each of its crates.
    let vssd = &meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "vssd")
        .unwrap()["dependencies"];
    for kit in KIT {
        let dep = vssd
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["name"] == *kit)
            .unwrap_or_else(|| panic!("vssd does not depend on {kit}"));
        assert_eq!(
            dep["optional"], true,
            "{kit} must stay behind the optional feature `kit`"
        );
    }
}
