//! The option table: what each fio option means in the simulator.
//!
//! Every option the simulator carries out is one entry of a table — the
//! names fio accepts for it and the function that parses its value into
//! the [`JobSpec`] — grouped by what it governs: `workload` (what I/O a
//! job issues), `pacing` (how long and how fast), `output` (what it
//! reports and logs), `replay` (`read_iolog`), `defaults` (options
//! accepted only at a value that changes nothing here). `fio` holds
//! fio's own names: those that change nothing in a simulation, those the
//! simulator cannot honour, aliases, and fio's whole option list.

mod defaults;
mod fio;
mod output;
mod pacing;
mod replay;
mod value;
mod workload;

use super::{JobFileError, JobSpec};
use value::{Value, err};
use vssd_profile::size::has_iec_unit;

pub use fio::{fio_name, print_rank};
pub use value::parse_time;

/// What an option does to a job: parse its value and set the job's fields.
type Set = fn(&mut JobSpec, &Value) -> Result<(), JobFileError>;

/// One option the simulator carries out: the names fio accepts for it (in
/// lower case), and what it does.
type Opt = (&'static [&'static str], Set);

/// The option tables, looked up in this order.
const TABLES: &[&[Opt]] = &[
    workload::OPTIONS,
    pacing::OPTIONS,
    output::OPTIONS,
    replay::OPTIONS,
    defaults::OPTIONS,
];

/// Options whose values are sizes (for the kb_base warning).
const SIZE_OPTIONS: &[&str] = &[
    "bs",
    "blocksize",
    "size",
    "offset",
    "offset_increment",
    "io_size",
    "io_limit",
    "blockalign",
    "ba",
];

/// The setter of an option the simulator carries out, by its lower-case name.
fn setter(name: &str) -> Option<Set> {
    TABLES
        .iter()
        .flat_map(|t| t.iter())
        .find(|(names, _)| names.contains(&name))
        .map(|&(_, set)| set)
}

/// Apply one option to a job. `value` is `None` for a bare `key` line.
///
/// An option is honoured (its table entry), accepted without effect
/// (`fio::NO_EFFECT`), refused with the reason (`fio::UNSUPPORTED`, a
/// bad value), refused as unknown to fio (with the nearest name fio has),
/// or, when fio has it but nothing here uses it, ignored with a warning.
pub fn apply(
    spec: &mut JobSpec,
    key: &str,
    value: Option<&str>,
    origin: &str,
    line: usize,
    warnings: &mut Vec<String>,
) -> Result<(), JobFileError> {
    let name = key.to_ascii_lowercase();
    let v = Value {
        key,
        name: &name,
        text: value,
        kb: spec.kb_base,
        origin,
        line,
    };
    if v.kb == 1024
        && SIZE_OPTIONS.contains(&v.name)
        && let Some(t) = value.filter(|t| t.split(',').any(has_iec_unit))
    {
        warnings.push(format!(
            "{origin}:{line}: option `{key}`: {t:?}: with fio's default kb_base=1024, KiB/MiB/GiB units are decimal (1000-based) and k/m/g binary; write 4k for 4096 bytes, or set kb_base=1000"
        ));
    }
    if let Some(set) = setter(v.name) {
        return set(spec, &v);
    }
    if fio::NO_EFFECT.contains(&v.name) {
        return Ok(());
    }
    if let Some((_, why)) = fio::UNSUPPORTED.iter().find(|(u, _)| *u == v.name) {
        return Err(v.err(*why));
    }
    if !fio::fio_knows(v.name) {
        // fio refuses a name it does not know; so does the simulator.
        return Err(v.err(match fio::nearest_option(v.name) {
            Some(n) => format!("fio has no such option (did you mean `{n}`?)"),
            None => "fio has no such option".into(),
        }));
    }
    warnings.push(format!(
        "{origin}:{line}: fio option `{key}` is not simulated; ignored"
    ));
    Ok(())
}

/// Whole-job checks after all options are applied.
pub(super) fn check(spec: &JobSpec, origin: &str, line: usize) -> Result<(), JobFileError> {
    if spec.time_based && spec.runtime_ns.is_none() {
        return Err(err(
            origin,
            line,
            "time_based",
            format!("job [{}] is time_based but has no runtime", spec.name),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No name is in two tables, nor both honoured and listed as without
    /// effect or unsupported: the lookup order decides nothing.
    #[test]
    fn each_name_has_one_meaning() {
        let mut seen = std::collections::HashSet::new();
        for (names, _) in TABLES.iter().flat_map(|t| t.iter()) {
            for n in *names {
                assert!(seen.insert(*n), "{n} is in the option tables twice");
                assert!(
                    !fio::NO_EFFECT.contains(n),
                    "{n} is honoured and without effect"
                );
                assert!(
                    !fio::UNSUPPORTED.iter().any(|(u, _)| u == n),
                    "{n} is honoured and unsupported"
                );
            }
        }
    }
}
