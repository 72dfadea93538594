//! The `vssd serve` of a bench run, and of its time-scale probe: the
//! scenario's drive in memory, in real time, dilated.

use std::path::Path;

use crate::BenchError;
use crate::scenario::Scenario;
use vssd_guest::serve::ServeProcess;

/// `vssd serve` (the binary `exe`, its sockets in `dir`) for the drive of
/// scenario `sc`: in memory, in real time dilated by `time_scale` (`vssd
/// serve --time-scale`), with `extra` arguments.
pub(crate) fn start(
    sc: &Scenario,
    exe: &Path,
    dir: &Path,
    time_scale: &str,
    extra: &[String],
) -> Result<ServeProcess, BenchError> {
    let mut args = vec![
        "--profile".to_string(),
        sc.profile_name.clone(),
        "--capacity".to_string(),
        sc.capacity.to_string(),
        "--memory".to_string(),
        "--realtime".to_string(),
        "--time-scale".to_string(),
        time_scale.to_string(),
    ];
    args.extend_from_slice(extra);
    Ok(ServeProcess::start(exe, dir, sc.bus, 2, &args)?)
}
