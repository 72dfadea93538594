//! The report as a document of headings, paragraphs, tables and charts,
//! rendered to Markdown and HTML by [`super::render`].

use super::super::chart::Chart;
use super::super::results::{BenchResults, Mode};
use super::figures::*;
use super::phase_stems;

/// Inline text.
pub(super) enum Span {
    Text(String),
    Strong(String),
    Code(String),
}

#[derive(Clone, Copy, PartialEq)]
pub(super) enum Col {
    Text,
    Num,
    /// PASS / FAIL, coloured in HTML.
    Status,
}

pub(super) struct Table {
    pub(super) cols: Vec<(String, Col)>,
    pub(super) rows: Vec<Vec<String>>,
}

impl Table {
    fn new(cols: &[(&str, Col)]) -> Table {
        Table {
            cols: cols.iter().map(|(h, c)| (h.to_string(), *c)).collect(),
            rows: Vec::new(),
        }
    }
}

pub(super) enum Block {
    Heading(u8, String),
    Para(Vec<Span>),
    Table(Table),
    /// A chart: its file name and title.
    Chart {
        file: String,
        title: String,
    },
    List(Vec<Vec<Span>>),
}

fn text(s: impl Into<String>) -> Span {
    Span::Text(s.into())
}

fn status(passed: bool) -> String {
    if passed { "PASS" } else { "FAIL" }.into()
}

fn opt_str(s: &Option<String>) -> String {
    s.clone().unwrap_or_else(|| "—".into())
}

fn what_ran(r: &BenchResults) -> Table {
    let mut t = Table::new(&[("", Col::Text), ("", Col::Text)]);
    let mut row = |k: &str, v: String| t.rows.push(vec![k.to_string(), v]);
    row("Scenario", r.scenario.clone());
    row(
        "Mode",
        match r.mode {
            Mode::Guest => "guest (real fio in a QEMU guest)".into(),
            Mode::Sim => "simulator (model time)".into(),
        },
    );
    row("Profile", r.profile.clone());
    row(
        "Capacity",
        format!(
            "{} ({} bytes)",
            fmt_bytes(r.capacity),
            fmt_num(r.capacity as f64, 0)
        ),
    );
    if r.mode == Mode::Guest {
        row("Bus", r.bus.name().into());
        row("Accelerator", opt_str(&r.environment.accel));
        row(
            "Time scale",
            if r.time_scale == 1.0 {
                "1 (none)".into()
            } else {
                format!(
                    "{}: the drive's clock ran {}× slower than the wall clock; every figure \
                     is converted back to the drive's time{}",
                    r.time_scale,
                    r.time_scale,
                    r.time_scale_reason
                        .as_deref()
                        .map(|w| format!(" ({w})"))
                        .unwrap_or_default()
                )
            },
        );
        row("Guest kernel", opt_str(&r.environment.guest_kernel));
        row("QEMU", opt_str(&r.environment.qemu));
        row("fio", opt_str(&r.environment.fio));
    }
    row("vssd", r.environment.vssd.clone());
    row(
        "Host",
        format!("{} ({} CPUs)", r.environment.host, r.environment.host_cpus),
    );
    row("Started", fmt_unix(r.started_unix));
    row(
        "Phases",
        format!(
            "{} run ({})",
            r.phases.len(),
            r.phases
                .iter()
                .map(|p| p.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    if let Some(sim) = r.sim.as_deref() {
        row(
            "Simulator run",
            format!(
                "{} phases, profile {}, {}, idle gaps replayed from the guest",
                sim.phases.len(),
                sim.profile,
                fmt_bytes(sim.capacity)
            ),
        );
    }
    t
}

fn key_table(r: &BenchResults) -> Option<Table> {
    let (present, rows) = key_figures(r);
    if rows.is_empty() {
        return None;
    }
    let mut cols = vec![
        ("Phase".to_string(), Col::Text),
        ("Workload".to_string(), Col::Text),
    ];
    for (_, head) in &present {
        cols.push((head.to_string(), Col::Num));
        cols.push(("× baseline".to_string(), Col::Num));
    }
    cols.push(("Baseline".to_string(), Col::Text));
    let mut t = Table {
        cols,
        rows: Vec::new(),
    };
    for row in rows {
        let mut cells = vec![row.phase, row.workload];
        for ((k, _), (v, ratio)) in present.iter().zip(&row.values) {
            cells.push(key_cell(k, *v));
            cells.push(ratio.map(fmt_ratio).unwrap_or_else(|| "—".into()));
        }
        cells.push(row.baseline.unwrap_or_else(|| "—".into()));
        t.rows.push(cells);
    }
    Some(t)
}

fn trim_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Discards", Col::Num),
        ("Write-zeroes", Col::Num),
        ("Requested", Col::Num),
        ("Freed", Col::Num),
        ("Already unmapped", Col::Num),
        ("Freed / requested", Col::Num),
    ]);
    for p in &r.phases {
        let Some(a) = &p.trim else { continue };
        if p.kind != "trim" && a.discard_cmds == 0 && a.write_zeroes_cmds == 0 {
            continue;
        }
        let share = if a.requested_bytes > 0 {
            fmt_pct(a.freed_bytes as f64 / a.requested_bytes as f64).replace('+', "")
        } else {
            "—".into()
        };
        t.rows.push(vec![
            p.name.clone(),
            fmt_num(a.discard_cmds as f64, 0),
            fmt_num(a.write_zeroes_cmds as f64, 0),
            fmt_bytes(a.requested_bytes),
            fmt_bytes(a.freed_bytes),
            fmt_bytes(a.already_unmapped_bytes),
            share,
        ]);
    }
    (!t.rows.is_empty()).then_some(t)
}

fn expect_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Result", Col::Status),
        ("Assertion", Col::Text),
        ("Values", Col::Text),
    ]);
    for e in &r.expects {
        let values = match &e.inconclusive {
            Some(why) => format!("{} — {why}", e.detail),
            None => e.detail.clone(),
        };
        t.rows.push(vec![e.label().into(), e.text.clone(), values]);
    }
    (!t.rows.is_empty()).then_some(t)
}

fn comparison_table(r: &BenchResults) -> Option<Table> {
    let cmp = comparisons(r);
    if cmp.is_empty() {
        return None;
    }
    let predictions = cmp.iter().any(|c| c.predicted.is_some());
    let mut cols = vec![
        ("Phase", Col::Text),
        ("Metric", Col::Text),
        ("Guest", Col::Num),
        ("Simulator", Col::Num),
        ("Difference", Col::Num),
        ("Within tolerance", Col::Status),
    ];
    if predictions {
        cols.push(("Predicted (job files)", Col::Num));
        cols.push(("Prediction's difference", Col::Num));
    }
    let mut t = Table::new(&cols);
    for c in cmp {
        let mut row = vec![
            c.phase.clone(),
            c.metric.clone(),
            fmt_metric(&c.metric, c.guest),
            fmt_metric(&c.metric, c.sim),
            fmt_pct(c.difference),
            if c.counted() {
                status(c.within)
            } else {
                c.verdict().into()
            },
        ];
        if predictions {
            row.push(c.predicted.map_or("—".into(), |v| fmt_metric(&c.metric, v)));
            row.push(c.predicted_difference().map_or("—".into(), fmt_pct));
        }
        t.rows.push(row);
    }
    Some(t)
}

fn timing_table(r: &BenchResults, sim: &BenchResults) -> Table {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Guest idle before (drive s)", Col::Num),
        ("Sim idle before (s)", Col::Num),
        ("Guest drive time (s)", Col::Num),
        ("Sim drive time (s)", Col::Num),
    ]);
    for p in &r.phases {
        let s = sim.phase(&p.name);
        let f = |v: Option<f64>| v.map(|v| fmt_num(v, 1)).unwrap_or_else(|| "—".into());
        t.rows.push(vec![
            p.name.clone(),
            fmt_num(p.gap_before_s, 1),
            f(s.map(|s| s.gap_before_s)),
            fmt_num(p.model_s, 1),
            f(s.map(|s| s.model_s)),
        ]);
    }
    t
}

fn phase_table(r: &BenchResults) -> Table {
    let mut t = Table::new(&[
        ("#", Col::Num),
        ("Phase", Col::Text),
        ("Kind", Col::Text),
        ("Idle before (drive s)", Col::Num),
        ("Drive time (s)", Col::Num),
        ("Wall clock (s)", Col::Num),
        ("Host written", Col::Num),
        ("NAND programmed", Col::Num),
        ("WAF", Col::Num),
        ("GC copies", Col::Num),
        ("Erases", Col::Num),
        ("Free blocks after", Col::Num),
    ]);
    for (i, p) in r.phases.iter().enumerate() {
        let io = phase_io(p);
        let dash = || "—".to_string();
        let delta = |f: fn(&vssd_model::Counters) -> u64| -> String {
            match (&p.counters_before, &p.counters_after) {
                (Some(a), Some(b)) if f(b) >= f(a) => fmt_num((f(b) - f(a)) as f64, 0),
                _ => dash(),
            }
        };
        t.rows.push(vec![
            (i + 1).to_string(),
            p.name.clone(),
            p.kind.clone(),
            fmt_num(p.gap_before_s, 1),
            fmt_num(p.model_s, 1),
            fmt_num(p.wall_s, 1),
            io.map(|x| fmt_bytes(x.0)).unwrap_or_else(dash),
            io.map(|x| fmt_bytes(x.1)).unwrap_or_else(dash),
            io.and_then(|x| x.2).map(fmt_ratio).unwrap_or_else(dash),
            delta(|c| c.gc_copies),
            delta(|c| c.erases),
            p.counters_after
                .as_ref()
                .map(|c| {
                    format!(
                        "{} / {}",
                        fmt_num(c.free_blocks as f64, 0),
                        fmt_num(c.total_blocks as f64, 0)
                    )
                })
                .unwrap_or_else(dash),
        ]);
    }
    t
}

fn metrics_table(r: &BenchResults) -> Option<Table> {
    let mut t = Table::new(&[
        ("Phase", Col::Text),
        ("Metric", Col::Text),
        ("Value", Col::Num),
        ("Raw", Col::Num),
    ]);
    for p in &r.phases {
        for (k, v) in &p.metrics {
            t.rows.push(vec![
                p.name.clone(),
                k.clone(),
                fmt_metric(k, *v),
                if v.is_finite() {
                    format!("{v}")
                } else {
                    "n/a".into()
                },
            ]);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

fn verdict(r: &BenchResults) -> Vec<Span> {
    let failed = r.expects.iter().filter(|e| e.failed()).count();
    let strict_failed = r.expects.iter().filter(|e| e.strict_failure()).count();
    let inconclusive = r.inconclusive();
    let mut v = Vec::new();
    if let Some(why) = &r.incomplete {
        v.push(Span::Strong("Incomplete:".into()));
        v.push(text(format!(
            " the run stopped early ({why}); the figures below are as far as it got. "
        )));
    }
    if r.expects.is_empty() {
        v.push(text("No expectations were stated."));
        return v;
    }
    if strict_failed > 0 {
        v.push(Span::Strong("Failed (strict):".into()));
        v.push(text(format!(
            " {failed} of {} expectations failed, {strict_failed} of them because they were \
             inconclusive (the guest, not the drive, set a figure they read, or the simulator \
             cannot measure it) and the run was strict.",
            r.expects.len()
        )));
    } else if failed > 0 {
        v.push(Span::Strong("Failed:".into()));
        v.push(text(format!(
            " {failed} of {} expectations did not hold.",
            r.expects.len()
        )));
    } else if inconclusive == r.expects.len() {
        v.push(Span::Strong("Inconclusive:".into()));
        v.push(text(format!(
            " none of the {inconclusive} expectations could be judged (they read figures the \
             guest, not the drive, set, or that the simulator cannot measure): no verdict."
        )));
    } else if inconclusive > 0 {
        v.push(Span::Strong("Passed, partly inconclusive:".into()));
        v.push(text(format!(
            " {} of {} expectations held; {inconclusive} could not be judged (no verdict).",
            r.expects.len() - inconclusive,
            r.expects.len()
        )));
    } else {
        v.push(Span::Strong("Passed:".into()));
        v.push(text(format!(" all {} expectations held.", r.expects.len())));
    }
    v.push(text(format!(" ({}.)", r.checks_line())));
    v
}

pub(super) fn document(r: &BenchResults, charts: &[Chart]) -> Vec<Block> {
    let mut d = vec![Block::Heading(1, format!("vssd bench: {}", r.scenario))];
    if !r.description.trim().is_empty() {
        d.push(Block::Para(vec![text(r.description.trim())]));
    }
    d.push(Block::Para(verdict(r)));
    d.push(Block::Heading(2, "What ran".into()));
    d.push(Block::Table(what_ran(r)));

    if let Some(t) = key_table(r) {
        d.push(Block::Heading(2, "Key figures".into()));
        d.push(Block::Para(vec![text(
            "Throughput in MB/s (10⁶ bytes/s), in the drive's time. A surface's figures are its \
             median over positions (what the built-in checks and the simulator comparison use: \
             a few positions a busy host stalled move the mean, not the median) and its mean, \
             labelled. “× baseline” is the ratio to the phase named under Baseline: among phases \
             of the same workload, the one named like “fresh”, else the first.",
        )]));
        d.push(Block::Table(t));
    }

    let own: Vec<&Chart> = charts
        .iter()
        .filter(|c| !c.file_name.starts_with("sim-"))
        .collect();
    if !own.is_empty() {
        d.push(Block::Heading(2, "Charts".into()));
        for c in own {
            d.push(Block::Chart {
                file: c.file_name.clone(),
                title: c.title.clone(),
            });
        }
    }

    if let Some(t) = trim_table(r) {
        d.push(Block::Heading(2, "TRIM audit".into()));
        d.push(Block::Para(vec![text(
            "What the drive saw of each TRIM phase: commands, bytes they covered, and bytes that \
             were mapped and are now free (the rest was already unmapped).",
        )]));
        d.push(Block::Table(t));
    }

    if let Some(t) = expect_table(r) {
        d.push(Block::Heading(2, "Expectations".into()));
        d.push(Block::Table(t));
    }

    sim_vs_guest(r, charts, &mut d);

    d.push(Block::Heading(2, "Phases".into()));
    d.push(Block::Para(vec![text(
        "Drive counters over each phase (host bytes written, NAND bytes programmed, their ratio, \
         GC copies and erases) and free blocks at its end. Drive time is the drive's own clock: \
         in a guest run the wall clock ÷ the time scale, for a precondition the model time it \
         aged the drive by, for an idle phase its seconds; the wall clock is the guest's (in \
         the simulator, which has no wall clock of its own, the drive's time).",
    )]));
    d.push(Block::Table(phase_table(r)));

    if let Some(t) = metrics_table(r) {
        d.push(Block::Heading(2, "All metrics".into()));
        d.push(Block::Table(t));
    }

    d.push(Block::Heading(2, "Files".into()));
    d.push(Block::List(files(r)));
    d
}

/// The simulator beside the guest: the comparison table and what its
/// verdicts mean, the overlay charts, the timing table, and the
/// simulator's own key figures and charts.
fn sim_vs_guest(r: &BenchResults, charts: &[Chart], d: &mut Vec<Block>) {
    let cmp = comparison_table(r);
    if cmp.is_none() && r.sim.is_none() {
        return;
    }
    d.push(Block::Heading(2, "Simulator vs guest".into()));
    if let Some(t) = cmp {
        d.push(Block::Para(vec![text(format!(
            "Difference = (simulator − guest) / guest; tolerance ±{}.",
            fmt_pct(r.tolerance).trim_start_matches('+')
        ))]));
        d.push(Block::Table(t));
        if let Some(qd) = r.sim.as_ref().and_then(|s| {
            s.phases
                .iter()
                .filter_map(|p| p.metrics.get("bus_capped_qd").copied())
                .reduce(f64::max)
        }) {
            d.push(Block::Para(vec![
                Span::Strong("queue depth:".into()),
                text(format!(
                    " on the {} bus the guest's requests reach the drive through QEMU's NBD \
                     client, which keeps at most {} in flight per connection whatever the \
                     guest's iodepth; the simulator ran the deeper jobs at the depth the \
                     drive can see ({qd:.0} at most), so both sides compare the same drive \
                     workload, not the guest's nominal one. virtio-blk has no such cap.",
                    r.bus.name(),
                    crate::simrun::NBD_CLIENT_MAX_REQUESTS
                )),
            ]));
        }
        if comparisons(r).iter().any(|c| c.replayed) {
            d.push(Block::Para(vec![
                Span::Strong("replayed:".into()),
                text(
                    " the simulator replayed the daemon's trace of each fio, surface and TRIM \
                     phase request by request (the times and order in which the daemon's model \
                     took them, offsets, sizes, at most as many in flight as the guest had), so \
                     its drive got exactly what the guest sent, bursts and stalls included; \
                     every such phase counts against the tolerance. The model is deterministic: \
                     where it reproduces the recorded completions the two figures agree by \
                     construction, so this column checks that the daemon delivered each \
                     completion when its model said (late deliveries make the guest slower), \
                     not the model. The prediction columns are the simulator's own run of the \
                     phase's job file or surface pass, without the trace: whether the model \
                     and the job predict what the guest measured (a guest-bound phase, which \
                     the guest could not issue at the drive's pace, differs there for that \
                     reason); reported, not counted.",
                ),
            ]));
        }
        if comparisons(r).iter().any(|c| c.guest_bound && !c.replayed) {
            d.push(Block::Para(vec![
                Span::Strong("guest-bound:".into()),
                text(
                    " the guest's requests reached the drive at under half the queue depth the \
                     simulator's did, so the emulated host, not the drive, set the guest's figure; \
                     not counted against the tolerance.",
                ),
            ]));
        }
        if comparisons(r)
            .iter()
            .any(|c| c.after_guest_bound && !c.within)
        {
            d.push(Block::Para(vec![
                Span::Strong("after guest-bound:".into()),
                text(
                    " the phase starts from the drive state a guest-bound phase left; the \
                     simulator replayed that phase at the guest's average rate, not with its \
                     bursts and stalls, so the write buffer and garbage-collection backlog it \
                     starts with can differ; not counted against the tolerance.",
                ),
            ]));
        }
    } else {
        d.push(Block::Para(vec![text(
            "No phase has a figure in both runs to compare.",
        )]));
    }
    for c in charts
        .iter()
        .filter(|c| c.file_name.starts_with("sim-vs-guest"))
    {
        d.push(Block::Chart {
            file: c.file_name.clone(),
            title: c.title.clone(),
        });
    }
    if let Some(sim) = r.sim.as_deref() {
        d.push(Block::Para(vec![text(
            "Idle time before each phase (the guest's measured gaps, replayed in the simulator) and phase durations:",
        )]));
        d.push(Block::Table(timing_table(r, sim)));
        if let Some(t) = key_table(sim) {
            d.push(Block::Heading(3, "Simulator run: key figures".into()));
            d.push(Block::Table(t));
        }
        let sim_charts: Vec<&Chart> = charts
            .iter()
            .filter(|c| c.file_name.starts_with("sim-") && !c.file_name.starts_with("sim-vs-guest"))
            .collect();
        if !sim_charts.is_empty() {
            d.push(Block::Heading(3, "Simulator run: charts".into()));
            for c in sim_charts {
                d.push(Block::Chart {
                    file: c.file_name.clone(),
                    title: c.title.clone(),
                });
            }
        }
    }
}

/// The files of the run's output directory, and what each holds.
fn files(r: &BenchResults) -> Vec<Vec<Span>> {
    let mut files = vec![vec![
        Span::Code("results.json".into()),
        text(": everything above, and fio's JSON per phase"),
    ]];
    let mut runs = vec![("", r)];
    if let Some(sim) = r.sim.as_deref() {
        runs.push(("sim-", sim));
    }
    for (prefix, run) in runs {
        let who = if prefix.is_empty() {
            ""
        } else {
            " (simulator)"
        };
        for (p, stem) in run.phases.iter().zip(phase_stems(run)) {
            if p.series.is_some() {
                files.push(vec![
                    Span::Code(format!("{prefix}series-{stem}.csv")),
                    text(format!(": {} throughput per interval{who}", p.name)),
                ]);
            }
            if p.surface.is_some() {
                files.push(vec![
                    Span::Code(format!("{prefix}surface-{stem}.csv")),
                    text(format!(": {} throughput by position{who}", p.name)),
                ]);
            }
        }
        files.push(vec![
            Span::Code(format!("{prefix}drive-samples.csv")),
            text(format!(": WAF and free blocks over time{who}")),
        ]);
    }
    files
}
