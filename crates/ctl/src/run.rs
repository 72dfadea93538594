//! `vssd ctl`'s subcommands: each sends its request and prints the reply,
//! as text ([`crate::format`]) or JSON.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::{CtlArgs, CtlCmd, FaultAdd, FaultCmd, TraceCmd};
use crate::client::{Client, wait_ready};
use crate::protocol::{
    self, CtlRequest, CutTrigger, EraseResult, FaultAddResult, FaultClearResult, FaultReport,
    PowerCutResult, PowerReport, PreconditionResult, SmartReport, StatsReport, Step, TraceStatus,
    TrimLogResult,
};
use crate::{CtlError, format};

fn control_path(args: &CtlArgs) -> Result<PathBuf, CtlError> {
    match (&args.control, &args.socket) {
        (Some(c), _) => Ok(c.clone()),
        (None, Some(s)) => Ok(PathBuf::from(format!("{}.ctl", s.display()))),
        (None, None) => Err(CtlError::Usage(
            "say which daemon: --control PATH (or --socket SOCKET for SOCKET.ctl, or VSSD_CONTROL)"
                .into(),
        )),
    }
}

fn print_json(v: &impl serde::Serialize) -> Result<(), CtlError> {
    let mut s = serde_json::to_string(v).map_err(|e| CtlError::Protocol(e.to_string()))?;
    s.push('\n');
    print_text(&s)
}

fn print_text(s: &str) -> Result<(), CtlError> {
    vssd_common::cli_out::print(s).map_err(CtlError::Output)
}

fn trim_log(client: &mut Client, follow: bool, last: usize, json: bool) -> Result<(), CtlError> {
    let fetch = |client: &mut Client, after: u64| -> Result<TrimLogResult, CtlError> {
        client.call_typed(&CtlRequest::TrimLog { after, max: 10_000 }, &mut |_| {})
    };
    // Everything still in the ring, of which the last `last` are shown.
    let mut r = fetch(client, 0)?;
    let mut next = r.records.last().map(|x| x.seq).unwrap_or(0);
    while r.records.len() == 10_000 {
        let more = fetch(client, next)?;
        if more.records.is_empty() {
            break;
        }
        next = more.records.last().map(|x| x.seq).unwrap_or(next);
        r.records.extend(more.records);
    }
    let skip = if follow {
        r.records.len()
    } else {
        r.records.len().saturating_sub(last)
    };
    let mut header = !json;
    let show = |records: &[protocol::TrimRecord], header: &mut bool| -> Result<(), CtlError> {
        let mut text = String::new();
        for rec in records {
            if json {
                text.push_str(
                    &serde_json::to_string(rec).map_err(|e| CtlError::Protocol(e.to_string()))?,
                );
                text.push('\n');
            } else {
                if *header {
                    text.push_str(&format::trim_header());
                    *header = false;
                }
                text.push_str(&format::trim_record(rec));
            }
        }
        print_text(&text)
    };
    if !follow {
        if r.records.is_empty() && !json {
            return print_text("no discards received yet\n");
        }
        return show(&r.records[skip..], &mut header);
    }
    if !json {
        print_text("waiting for discards (Ctrl-C to stop)\n")?;
    }
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let more = fetch(client, next)?;
        if more.lost > 0 && !json {
            print_text(&format!(
                "({} records dropped before they could be shown)\n",
                more.lost
            ))?;
        }
        if let Some(l) = more.records.last() {
            next = l.seq;
        }
        show(&more.records, &mut header)?;
    }
}

/// Seconds given to `name`: a finite number from 0 to a day (86400).
fn check_seconds(name: &str, v: f64) -> Result<(), CtlError> {
    if v.is_finite() && (0.0..=86_400.0).contains(&v) {
        Ok(())
    } else {
        Err(CtlError::Usage(format!(
            "{name} {v}: seconds from 0 to 86400 (e.g. 2.5)"
        )))
    }
}

fn fault(client: &mut Client, cmd: FaultCmd) -> Result<(), CtlError> {
    match cmd {
        FaultCmd::Add { fault, json } => {
            // Checked here too: JSON has no NaN or infinity to send.
            if let FaultAdd::MediaWear {
                acceleration,
                retention_days,
            } = fault
                && !(acceleration.is_finite() && retention_days.is_finite())
            {
                return Err(CtlError::Usage(format!(
                    "media-wear: --acceleration {acceleration} must be from 1 to 1e12 and --retention-days {retention_days} from 0 to 36500"
                )));
            }
            let r: FaultAddResult = client.call_typed(
                &CtlRequest::FaultAdd {
                    fault: fault.spec(),
                },
                &mut |_| {},
            )?;
            if json {
                print_json(&r)
            } else {
                print_text(&format!("added {}\n", format::fault(&r.fault)))
            }
        }
        FaultCmd::List { lost, json } => {
            let r: FaultReport = client.call_typed(&CtlRequest::FaultList, &mut |_| {})?;
            match (lost, json) {
                (true, true) => print_json(&r.power.last_cut.map(|c| c.lost).unwrap_or_default()),
                (true, false) => print_text(&format::lost_writes(&r.power)),
                (false, true) => print_json(&r),
                (false, false) => print_text(&format::faults(&r)),
            }
        }
        FaultCmd::Clear { id, json } => {
            let r: FaultClearResult =
                client.call_typed(&CtlRequest::FaultClear { id }, &mut |_| {})?;
            if json {
                print_json(&r)
            } else {
                print_text(&format!("{} cleared\n", format::fault_count(r.cleared)))
            }
        }
    }
}

/// Run `vssd ctl`.
pub fn run(args: CtlArgs) -> Result<(), CtlError> {
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 86_400.0) {
        return Err(CtlError::Usage(format!(
            "--timeout {} must be between 0 and 86400 seconds",
            args.timeout
        )));
    }
    let control = control_path(&args)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    if let CtlCmd::Wait = args.cmd {
        return wait_ready(&control, timeout);
    }
    let mut client = Client::connect(&control, timeout)?;
    match args.cmd {
        CtlCmd::Wait => {}
        CtlCmd::Stats { json } => {
            let r: StatsReport = client.call_typed(&CtlRequest::Stats, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::stats(&r))?;
            }
        }
        CtlCmd::Smart { json } => {
            let r: SmartReport = client.call_typed(&CtlRequest::Smart, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text(&format::smart(&r))?;
            }
        }
        CtlCmd::TrimLog { follow, last, json } => {
            trim_log(&mut client, follow, last, json)?;
        }
        CtlCmd::Trace { cmd } => trace(&mut client, cmd)?,
        CtlCmd::Fault { cmd } => fault(&mut client, cmd)?,
        CtlCmd::Faults { lost, json } => fault(&mut client, FaultCmd::List { lost, json })?,
        CtlCmd::PowerCut {
            after_writes,
            after_ms,
            at,
            random,
            restart_after,
            json,
        } => power_cut(
            &mut client,
            after_writes,
            after_ms,
            at,
            random,
            restart_after,
            json,
        )?,
        CtlCmd::PowerOn { json } => {
            let r: PowerReport = client.call_typed(&CtlRequest::PowerOn, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text("power on: the drive takes requests and connections again\n")?;
            }
        }
        CtlCmd::SecureErase { json } => {
            let r: EraseResult = client.call_typed(&CtlRequest::SecureErase, &mut |_| {})?;
            if json {
                print_json(&r)?;
            } else {
                print_text("secure erase done: the drive is fresh and reads as zeros\n")?;
            }
        }
        CtlCmd::Precondition {
            wear,
            trim_all,
            fill,
            fill_bs,
            random,
            amount,
            seed,
            json,
        } => {
            let steps =
                precondition_steps(wear, trim_all, fill.as_deref(), fill_bs, random, amount)?;
            precondition(&mut client, steps, seed, json)?;
        }
    }
    Ok(())
}

/// `ctl trace start|stop|status`.
fn trace(client: &mut Client, cmd: TraceCmd) -> Result<(), CtlError> {
    let (req, json) = match cmd {
        TraceCmd::Start { file, limit, json } => {
            let abs = if file.is_absolute() {
                file
            } else {
                std::env::current_dir()?.join(file)
            };
            let path = abs
                .to_str()
                .ok_or_else(|| CtlError::Usage(format!("{}: not a UTF-8 path", abs.display())))?;
            (
                CtlRequest::TraceStart {
                    path: path.to_string(),
                    limit,
                },
                json,
            )
        }
        TraceCmd::Stop { json } => (CtlRequest::TraceStop, json),
        TraceCmd::Status { json } => (CtlRequest::TraceStatus, json),
    };
    let r: TraceStatus = client.call_typed(&req, &mut |_| {})?;
    if json {
        print_json(&r)
    } else {
        print_text(&format::trace_status(&r))
    }
}

/// `ctl power-cut`: now, or armed to cut after writes, after a delay, at
/// a drive time or at a random write.
fn power_cut(
    client: &mut Client,
    after_writes: Option<u64>,
    after_ms: Option<u64>,
    at: Option<f64>,
    random: Option<u64>,
    restart_after: Option<f64>,
    json: bool,
) -> Result<(), CtlError> {
    for (name, v) in [("--at", at), ("--restart-after", restart_after)] {
        if let Some(v) = v {
            check_seconds(name, v)?;
        }
    }
    let ms = |s: f64| (s * 1000.0).round() as u64;
    let trigger = match (after_writes, after_ms, at, random) {
        (Some(writes), ..) => CutTrigger::AfterWrites { writes },
        (_, Some(ms), ..) => CutTrigger::AfterMs { ms },
        (_, _, Some(s), _) => CutTrigger::At { ms: ms(s) },
        (.., Some(seed)) => CutTrigger::Random { seed },
        _ => CutTrigger::Now,
    };
    let r: PowerCutResult = client.call_typed(
        &CtlRequest::PowerCut {
            trigger,
            restart_after_ms: restart_after.map(ms),
        },
        &mut |_| {},
    )?;
    if json {
        print_json(&r)
    } else {
        print_text(&format::power_cut(&r))
    }
}

/// The steps of `ctl precondition`, in the order they run.
fn precondition_steps(
    wear: Option<f64>,
    trim_all: bool,
    fill: Option<&str>,
    fill_bs: u64,
    random: Option<u64>,
    amount: String,
) -> Result<Vec<Step>, CtlError> {
    let mut steps = Vec::new();
    if let Some(percent) = wear {
        // Checked here too: JSON has no NaN or infinity to send.
        if !(percent.is_finite() && percent > 0.0 && percent <= 1000.0) {
            return Err(CtlError::Usage(format!(
                "--wear {percent} must be in (0, 1000] percent"
            )));
        }
        steps.push(Step::Wear { percent });
    }
    if trim_all {
        steps.push(Step::TrimAll);
    }
    match fill {
        None => {}
        Some("seq") | Some("sequential") => steps.push(Step::FillSeq { bs: fill_bs }),
        Some(o) => {
            return Err(CtlError::Usage(format!(
                "--fill {o:?}: only `seq` is supported"
            )));
        }
    }
    if let Some(bs) = random {
        steps.push(Step::Random { bs, amount });
    }
    if steps.is_empty() {
        return Err(CtlError::Usage(
            "precondition: give --wear PERCENT, --trim-all, --fill seq and/or --random SIZE".into(),
        ));
    }
    Ok(steps)
}

/// `ctl precondition`: run the steps, with a progress bar on a terminal.
fn precondition(
    client: &mut Client,
    steps: Vec<Step>,
    seed: u64,
    json: bool,
) -> Result<(), CtlError> {
    let names: Vec<String> = steps.iter().map(format::step_name).collect();
    let mut bar =
        (!json && std::io::stderr().is_terminal()).then(|| format::PreconditionBar::new(&names));
    let r: PreconditionResult = client.call_typed(
        &CtlRequest::Precondition {
            steps,
            seed,
            progress: true,
        },
        &mut |p| {
            if let Some(b) = &mut bar {
                b.update(&p.progress);
            }
        },
    )?;
    if let Some(b) = bar {
        b.finish();
    }
    if json {
        print_json(&r)
    } else {
        print_text(&format::precondition(&r))
    }
}
