//! fio's own option names: the ones that change nothing here, the ones the
//! simulator cannot honour, aliases, the I/O engines' options, and fio's
//! whole option list (for telling a misspelt name from an ignored one).

/// Options fio has that change nothing in a simulation of one block device.
pub(super) const NO_EFFECT: &[&str] = &[
    "filename",
    "filename_format",
    "directory",
    "direct",
    "buffered",
    "ioengine",
    "iodepth_batch",
    "iodepth_batch_submit",
    "iodepth_batch_complete",
    "iodepth_batch_complete_min",
    "iodepth_batch_complete_max",
    "iodepth_low",
    "invalidate",
    "thread",
    "refill_buffers",
    "scramble_buffers",
    "buffer_compress_chunk",
    "buffer_pattern",
    "disable_slat",
    "disable_bw_measurement",
    "slat_percentiles",
    "cpus_allowed",
    "cpus_allowed_policy",
    "cpumask",
    "numa_cpu_nodes",
    "numa_mem_policy",
    "allow_mounted_write",
    "random_generator",
    "softrandommap",
    "unlink",
    "fallocate",
    "create_on_open",
    "overwrite",
    "log_compression",
    "ioscheduler",
    "nice",
    "prio",
    "prioclass",
    "hipri",
    "fixedbufs",
    "registerfiles",
    "sqthread_poll",
    "userspace_reap",
    "serialize_overlap",
    "significant_figures",
    "rwmixcycle",
    "iomem",
    "mem",
    "iomem_align",
    "create_serialize",
    "stats",
];

/// Options fio has whose effect this simulator cannot reproduce.
pub(super) const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "bssplit",
        "mixed block sizes are not simulated; use one `bs` per job",
    ),
    (
        "bsrange",
        "block-size ranges are not simulated; use one `bs` per job",
    ),
    (
        "blocksize_range",
        "block-size ranges are not simulated; use one `bs` per job",
    ),
    (
        "blocksize_unaligned",
        "unaligned block sizes are not simulated",
    ),
    ("bs_unaligned", "unaligned block sizes are not simulated"),
    ("zonemode", "zoned I/O is not simulated"),
    ("zonesize", "zoned I/O is not simulated"),
    ("zonerange", "zoned I/O is not simulated"),
    ("zoneskip", "zoned I/O is not simulated"),
    (
        "rate_min",
        "minimum-rate enforcement is not simulated (rate and rate_iops are)",
    ),
    (
        "rate_iops_min",
        "minimum-rate enforcement is not simulated (rate and rate_iops are)",
    ),
    (
        "rate_process",
        "rate_process is not simulated (leave it out: fio's default, linear, is what rate and rate_iops do)",
    ),
    ("ratecycle", "ratecycle is not simulated"),
    ("percentage_random", "partly random jobs are not simulated"),
    (
        "file_service_type",
        "only one file (the device) is simulated",
    ),
    ("openfiles", "only one file (the device) is simulated"),
    (
        "verify_only",
        "data verification needs data; the model keeps none",
    ),
    ("trim_percentage", "trim-after-verify is not simulated"),
    ("trim_backlog", "trim-after-verify is not simulated"),
    ("trim_verify_zero", "trim-after-verify is not simulated"),
    ("write_barrier", "write barriers are not simulated"),
    ("flow", "flow control between jobs is not simulated"),
    ("flow_id", "flow control between jobs is not simulated"),
    ("exec_prerun", "running commands is not simulated"),
    ("exec_postrun", "running commands is not simulated"),
    (
        "filesize",
        "only one file (the device) is simulated; use `size`",
    ),
    ("fill_fs", "no file system is simulated"),
    (
        "log_max_value",
        "bandwidth logs hold interval averages only",
    ),
    (
        "offset_align",
        "percentage offsets are aligned to the block size",
    ),
    ("thinktime_spin", "thinktime is simulated as sleep only"),
    (
        "thinktime_iotime",
        "thinktime is simulated per `thinktime_blocks` only",
    ),
    (
        "rw_sequencer",
        "sequential jobs always advance by one block",
    ),
    ("io_submit_mode", "I/O is always issued inline"),
    (
        "latency_target",
        "searching for the queue depth that meets a latency target is not simulated; use a fixed iodepth (and max_latency to stop on a latency)",
    ),
    (
        "latency_window",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
    (
        "latency_percentile",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
    (
        "latency_run",
        "searching for the queue depth that meets a latency target is not simulated",
    ),
];

/// fio's aliases of the options the simulator knows, with their canonical
/// names (fio 3.33's option table): fio prints options under these.
const ALIASES: &[(&str, &str)] = &[
    ("readwrite", "rw"),
    ("blocksize", "bs"),
    ("blockalign", "ba"),
    ("blocksize_range", "bsrange"),
    ("blocksize_unaligned", "bs_unaligned"),
    ("io_limit", "io_size"),
    ("fill_fs", "fill_device"),
    ("fileoffset", "offset"),
    ("nr_files", "nrfiles"),
    ("timeout", "runtime"),
    ("iomem", "mem"),
    ("mem_align", "iomem_align"),
    ("ratemin", "rate_min"),
    ("ratecycle", "rate_cycle"),
    ("wait_for_previous", "stonewall"),
    ("disable_bw", "disable_bw_measurement"),
    ("iodepth_batch_submit", "iodepth_batch"),
    ("iodepth_batch_complete", "iodepth_batch_complete_min"),
    ("ss", "steadystate"),
    ("ss_dur", "steadystate_duration"),
    ("ss_ramp", "steadystate_ramp_time"),
];

/// I/O engine options (libaio, io_uring): fio parses them in a second pass,
/// so they come last in its printed option lists.
const ENGINE_OPTIONS: &[&str] = &[
    "userspace_reap",
    "hipri",
    "fixedbufs",
    "registerfiles",
    "sqthread_poll",
    "sqthread_poll_cpu",
    "nonvectored",
    "uncached",
    "nowait",
    "force_async",
    "cmdprio_percentage",
    "cmdprio_class",
    "cmdprio",
    "cmdprio_bssplit",
];

/// The name fio prints an option under: lower case, aliases resolved.
pub fn fio_name(key: &str) -> String {
    let k = key.to_ascii_lowercase();
    match ALIASES.iter().find(|(a, _)| *a == k) {
        Some((_, name)) => (*name).to_string(),
        None => k,
    }
}

/// Where fio parses an option among a section's (higher first): its option
/// priority (`kb_base`, `unit_base`, `lockfile`, `cpus_allowed_policy`: 1;
/// `filename`, `filename_format`: −1; others 0), and the I/O engine's
/// options after all of those.
pub fn print_rank(name: &str) -> i8 {
    match name {
        "kb_base" | "unit_base" | "lockfile" | "cpus_allowed_policy" => 1,
        "filename" | "filename_format" => -1,
        n if ENGINE_OPTIONS.contains(&n) => -2,
        _ => 0,
    }
}

/// fio 3.33's option names (`fio --cmdhelp=all`), one per line.
const FIO_OPTIONS: &str = include_str!("fio_options.txt");

fn fio_names() -> impl Iterator<Item = &'static str> {
    FIO_OPTIONS
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
}

/// Whether fio has an option of this name (lower case; aliases included).
pub(super) fn fio_knows(k: &str) -> bool {
    fio_names().any(|n| n == k)
        || ALIASES.iter().any(|(a, _)| *a == k)
        || ENGINE_OPTIONS.contains(&k)
}

/// The fio option name closest to a misspelt one, if any is close.
pub(super) fn nearest_option(k: &str) -> Option<&'static str> {
    fio_names()
        .chain(ALIASES.iter().map(|(a, _)| *a))
        .chain(ENGINE_OPTIONS.iter().copied())
        .map(|n| (strsim::jaro_winkler(k, n), n))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, n)| n)
}
