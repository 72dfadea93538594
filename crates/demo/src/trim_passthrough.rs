//! The `trim-passthrough` scenario: does a filesystem's TRIM get through
//! this bus and driver, and what does it free? Protocol P2 (the Japanese
//! driver test of 2011) made exact: instead of inferring TRIM from the
//! drive's recovery alone, the drive's own TRIM audit says what arrived.
//!
//! Three cases, each on a freshly erased drive, in its own guest boot: a
//! filesystem is made (without discard), a file fills most of it, random
//! 4 KiB writes age the drive (the "used state"), the file is deleted, then
//! (a) the filesystem was mounted with `-o discard`, (b) `fstrim` runs,
//! (c) neither. Finally fio writes the whole disk sequentially. Per case:
//! bytes deleted, bytes that reached the drive as TRIM, bytes freed in the
//! FTL, and the sequential write throughput afterwards.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::{DemoArgs, DemoError, Env, Fs};
use vssd_guest::Guest;
use vssd_guest::bus::Bus;
use vssd_profile::size::format_size;

/// How deleted files may be trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Case {
    /// Mounted with `-o discard`: the filesystem trims as it frees.
    Discard,
    /// `fstrim` after deleting.
    Fstrim,
    /// Neither.
    None,
}

impl Case {
    /// All cases, in the order they run.
    pub const ALL: [Case; 3] = [Case::Discard, Case::Fstrim, Case::None];

    fn label(self) -> &'static str {
        match self {
            Case::Discard => "mount -o discard",
            Case::Fstrim => "fstrim",
            Case::None => "neither",
        }
    }
}

/// One case's figures.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// Bytes of the deleted file.
    pub deleted_bytes: u64,
    /// TRIM commands the drive received (discards + write-zeroes).
    pub trim_cmds: u64,
    /// Bytes those commands covered.
    pub trim_bytes: u64,
    /// Bytes they freed in the FTL.
    pub freed_bytes: u64,
    /// Bytes they covered that were not mapped anyway.
    pub already_unmapped_bytes: u64,
    /// What 64 KiB of the deleted file's raw LBAs read after the delete
    /// (TrimCheck's test): `zeros`, `pattern` (0xFF), `old` (the file's
    /// data), `changed` (something else) or `unknown` (no FIEMAP).
    pub read_back: String,
    /// Sequential 128 KiB write throughput over the whole disk afterwards, bytes/s.
    pub seq_write_bytes_s: f64,
    /// Wall time of the guest run, s.
    pub guest_seconds: f64,
}

/// The scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct TrimPassthroughReport {
    /// Profile name.
    pub profile: String,
    /// Bus.
    pub bus: Bus,
    /// Filesystem.
    pub fs: Fs,
    /// Capacity, bytes.
    pub capacity: u64,
    /// The model's fresh sequential write figure, bytes/s: sustained.
    pub predicted_seq_write_bytes_s: f64,
    /// The model's figure for the cases' final write (the whole disk) on a
    /// fresh drive whose write buffer starts empty, bytes/s.
    pub predicted_whole_disk_bytes_s: f64,
    /// What the drive returns for trimmed LBAs (the preset's
    /// `read_after_trim`): `zeros`, `pattern` or `old-data`.
    pub read_after_trim: String,
    /// Per case.
    pub cases: Vec<CaseResult>,
}

fn mount_opts(fs: Fs, case: Case) -> &'static str {
    match (case, fs) {
        (Case::Discard, _) => "-o discard",
        // vfat never discards unless told; the others are told not to
        // (f2fs discards by default).
        (_, Fs::Vfat) => "",
        _ => "-o nodiscard",
    }
}

/// The guest script of one case.
pub fn script(bus: Bus, fs: Fs, case: Case, file_bytes: u64, age_bytes: u64) -> String {
    let dev = bus.guest_dev();
    let file_mib = (file_bytes >> 20).max(1);
    let age = (age_bytes / 4096).max(1) * 4096;
    let trim = match case {
        Case::Fstrim => "fstrim -v /tmp/mnt",
        _ => ":",
    };
    format!(
        r#"set -e
M=/tmp/mnt
mkdir -p $M
echo "@@STEP making {fs:?} on {dev}"
{mkfs} >/dev/null
mount {opts} {dev} $M
FIO="fio --ioengine=libaio --direct=1 --end_fsync=1"
echo "@@STEP writing a {file_mib} MiB file"
$FIO --name=fill --filename=$M/data --size={file_mib}M --rw=write --bs=1M --iodepth=16 >/dev/null
echo "@@STEP aging it: random 4 KiB writes inside the file"
$FIO --name=age --filename=$M/data --size={file_mib}M --rw=randwrite --bs=4k --iodepth=32 --io_size={age} --norandommap --randrepeat=0 >/dev/null
echo "deleted=$(stat -c %s $M/data)"
# TrimCheck's way: where the file lies on the disk (FIEMAP), what 64 KiB
# there read before it is deleted, and what they read after.
S=$(filefrag -b512 -v $M/data | awk '$1=="0:" {{sub(/\.\.$/,"",$4); print $4}}') || S=
raw() {{ dd if={dev} bs=512 skip=$S count=128 iflag=direct 2>/dev/null | cksum; }}
[ -z "$S" ] || before=$(raw)
echo "@@STEP deleting it ({label})"
rm $M/data
sync
{trim}
sync
umount $M
if [ -z "$S" ]; then r=unknown
else
    after=$(raw)
    if [ "$after" = "$(head -c 65536 /dev/zero | cksum)" ]; then r=zeros
    elif [ "$after" = "$(head -c 65536 /dev/zero | tr '\000' '\377' | cksum)" ]; then r=pattern
    elif [ "$after" = "$before" ]; then r=old
    else r=changed
    fi
fi
echo "readback=$r lba=$S"
echo "@@STEP sequential writes over the whole disk"
echo "@@FIO"
fio --name=after --filename={dev} --ioengine=libaio --direct=1 --rw=write --bs=128k --iodepth=32 --output-format=json
echo "@@END"
"#,
        mkfs = fs.mkfs(&dev, false),
        opts = mount_opts(fs, case),
        label = case.label(),
    )
}

/// `deleted=N`, the `readback=` verdict and the fio JSON's write
/// bandwidth from a case's output.
pub fn parse_case(output: &str) -> Result<(u64, String, f64), String> {
    let deleted = output
        .lines()
        .find_map(|l| l.strip_prefix("deleted="))
        .and_then(|v| v.trim().parse().ok())
        .ok_or("no deleted= line")?;
    let read_back = output
        .lines()
        .find_map(|l| l.strip_prefix("readback="))
        .and_then(|v| v.split_whitespace().next())
        .ok_or("no readback= line")?
        .to_string();
    let a = output.find("@@FIO").ok_or("no @@FIO marker")?;
    let b = output[a..].find("@@END").ok_or("no @@END marker")? + a;
    let json = &output[a + 5..b];
    let start = json.find('{').ok_or("no JSON from fio")?;
    let v: serde_json::Value = serde_json::from_str(&json[start..]).map_err(|e| e.to_string())?;
    let bw = v["jobs"][0]["write"]["bw_bytes"]
        .as_f64()
        .ok_or("no write.bw_bytes in fio's JSON")?;
    Ok((deleted, read_back, bw))
}

/// What a read-back says about TRIM, as the guest can tell it on a drive
/// whose trimmed LBAs read as `mode` (`read_after_trim`).
fn read_back_verdict(read_back: &str, mode: &str) -> &'static str {
    match (read_back, mode) {
        ("zeros" | "pattern", _) => "trimmed",
        ("old", "old-data") => "old data (can't tell)",
        ("old", _) => "old data: not trimmed",
        ("changed", _) => "overwritten",
        _ => "unknown",
    }
}

/// Run the three cases.
pub fn run(args: &DemoArgs, env: &Env) -> Result<(), DemoError> {
    let serve = env.start_serve()?;
    // Most of the disk, leaving room for the filesystem's own metadata.
    let file_bytes = args.capacity / 10 * 6;
    let age_bytes = (file_bytes as f64 * args.random_passes) as u64;
    let mut cases = Vec::new();
    for case in Case::ALL {
        serve.secure_erase()?;
        let before = serve.stats()?.trim_total();
        env.say(&format!(
            "case {}: {:?} on {} ({} bus), file of {}",
            case.label(),
            args.fs,
            args.bus.guest_dev(),
            args.bus,
            format_size(file_bytes)
        ));
        let t0 = Instant::now();
        let run = Guest::new().disk(serve.disk()).run_script_streaming(
            &script(args.bus, args.fs, case, file_bytes, age_bytes),
            Duration::from_secs(args.timeout),
            |line| {
                if let Some(step) = line.strip_prefix("@@STEP ") {
                    env.say(&format!("[{:>4.0} s]   {step}", t0.elapsed().as_secs_f64()));
                }
            },
        )?;
        if run.exit_code != 0 {
            return Err(DemoError::Script {
                status: run.exit_code,
                output: run.output,
            });
        }
        let (deleted, read_back, bw) = parse_case(&run.output).map_err(|why| DemoError::Fio {
            phase: case.label().into(),
            why,
        })?;
        let t = serve.stats()?.trim_total().since(&before);
        cases.push(CaseResult {
            case,
            deleted_bytes: deleted,
            trim_cmds: t.discard_cmds + t.write_zeroes_cmds,
            trim_bytes: t.requested_bytes,
            freed_bytes: t.freed_bytes,
            already_unmapped_bytes: t.already_unmapped_bytes,
            read_back,
            seq_write_bytes_s: bw,
            guest_seconds: t0.elapsed().as_secs_f64(),
        });
    }
    drop(serve);
    let report = TrimPassthroughReport {
        profile: env.profile.name.clone(),
        bus: args.bus,
        fs: args.fs,
        capacity: args.capacity,
        predicted_seq_write_bytes_s: env.profile.predict().seq_write_bytes_s,
        predicted_whole_disk_bytes_s: super::write_from_empty_buffer(&env.profile, args.capacity),
        read_after_trim: env.profile.identity.read_after_trim.name().to_string(),
        cases,
    };
    if args.json {
        env.print(&serde_json::to_string_pretty(&report).unwrap_or_default())
    } else {
        env.print(&table(&report))
    }
}

/// The human-readable result.
pub fn table(r: &TrimPassthroughReport) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "\nTRIM passthrough: {:?} on a {} {} drive, {} bus ({}); one deleted file per case, fresh drive each time",
        r.fs,
        format_size(r.capacity),
        r.profile,
        r.bus,
        r.bus.guest_dev()
    );
    let _ = writeln!(
        o,
        "{:<18} {:>10} {:>13} {:>11} {:>13} {:>22} {:>16}",
        "case",
        "deleted",
        "TRIM received",
        "(commands)",
        "freed in FTL",
        "LBAs read (TrimCheck)",
        "seq write after"
    );
    for c in &r.cases {
        let _ = writeln!(
            o,
            "{:<18} {:>10} {:>13} {:>11} {:>13} {:>22} {:>11.1} MB/s",
            c.case.label(),
            format_size(c.deleted_bytes),
            format_size(c.trim_bytes),
            c.trim_cmds,
            format_size(c.freed_bytes),
            read_back_verdict(&c.read_back, &r.read_after_trim),
            c.seq_write_bytes_s / 1e6
        );
    }
    let _ = writeln!(
        o,
        "{:<18} {:>10} {:>13} {:>11} {:>13} {:>22} {:>11.1} MB/s   (model; sustained {:.1} MB/s once the write buffer is full)",
        "(fresh drive)",
        "",
        "",
        "",
        "",
        "",
        r.predicted_whole_disk_bytes_s / 1e6,
        r.predicted_seq_write_bytes_s / 1e6
    );
    let passes = |case: Case| {
        r.cases
            .iter()
            .find(|c| c.case == case)
            .is_some_and(|c| c.trim_bytes > 0 && c.freed_bytes > 0)
    };
    let _ = writeln!(
        o,
        "\nTRIM reaches the drive: with -o discard {}, with fstrim {}.",
        if passes(Case::Discard) { "yes" } else { "NO" },
        if passes(Case::Fstrim) { "yes" } else { "NO" }
    );
    let _ = writeln!(
        o,
        "LBAs read: the deleted file's first 64 KiB, found with FIEMAP (filefrag) and read back raw \
         after the delete, as TrimCheck does. This preset's trimmed LBAs read as {}{}",
        r.read_after_trim,
        if r.read_after_trim == "old-data" {
            ": the old data until the flash is erased, so the guest cannot tell a TRIM from none; \
             the drive's audit (TRIM received, freed) can."
        } else {
            ", so the guest sees whether TRIM reached the drive."
        }
    );
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_and_parsing() {
        let s = script(Bus::Sata, Fs::Ext4, Case::Fstrim, 600 << 20, 900 << 20);
        assert!(s.contains("mkfs.ext4 -q -F -E nodiscard /dev/sda"));
        assert!(s.contains("mount -o nodiscard /dev/sda"));
        assert!(s.contains("fstrim -v /tmp/mnt"));
        let s = script(Bus::Nvme, Fs::Vfat, Case::Discard, 600 << 20, 900 << 20);
        assert!(s.contains("mount -o discard /dev/nvme0n1"));
        let out =
            "x\ndeleted=1048576\n@@FIO\nnote\n{\"jobs\":[{\"write\":{\"bw_bytes\":123}}]}\n@@END\n";
        assert!(parse_case(out).is_err(), "no readback= line");
        let out = "x\ndeleted=1048576\nreadback=zeros lba=2048\n@@FIO\nnote\n\
                   {\"jobs\":[{\"write\":{\"bw_bytes\":123}}]}\n@@END\n";
        assert_eq!(parse_case(out), Ok((1048576, "zeros".into(), 123.0)));
        assert!(s.contains("filefrag -b512 -v $M/data"));
        assert_eq!(read_back_verdict("zeros", "zeros"), "trimmed");
        assert_eq!(read_back_verdict("pattern", "pattern"), "trimmed");
        assert_eq!(read_back_verdict("old", "zeros"), "old data: not trimmed");
        assert_eq!(
            read_back_verdict("old", "old-data"),
            "old data (can't tell)"
        );
        assert!(parse_case("deleted=1\n").is_err());
    }
}
