//! The line under every chart's title: what ran, where.

use vssd_chart::numfmt::fmt_bytes;

use crate::results::{BenchResults, Mode};

/// "profile P · 1 GiB · virtio · guest (kvm, Linux 6.1)" or "... · simulator".
pub(crate) fn subtitle(r: &BenchResults) -> String {
    let mut parts = vec![format!("profile {}", r.profile), fmt_bytes(r.capacity)];
    match r.mode {
        Mode::Guest => {
            parts.push(format!("{} bus", r.bus.name()));
            let mut how = Vec::new();
            if let Some(a) = &r.environment.accel {
                how.push(a.clone());
            }
            if let Some(k) = &r.environment.guest_kernel {
                how.push(format!("Linux {k}"));
            }
            if how.is_empty() {
                parts.push("guest".into());
            } else {
                parts.push(format!("guest ({})", how.join(", ")));
            }
        }
        Mode::Sim => parts.push("simulator (model time)".into()),
    }
    if r.incomplete.is_some() {
        parts.push("INCOMPLETE".into());
    }
    parts.join(" · ")
}
