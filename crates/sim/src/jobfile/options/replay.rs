//! Options of trace replay (`read_iolog`): the trace, its pace, where its
//! requests land, which it skips.

use super::super::Dir;
use super::Opt;

/// The replay options, under each name fio accepts for them.
pub(super) const OPTIONS: &[Opt] = &[
    (&["read_iolog"], |s, v| {
        s.read_iolog = Some(v.need()?.to_string());
        Ok(())
    }),
    (&["read_iolog_chunked"], |_, v| {
        // Reading the log in chunks saves fio memory; the whole log is
        // read here either way.
        v.flag()?;
        Ok(())
    }),
    (&["replay_no_stall"], |s, v| {
        s.replay.no_stall = v.flag()?;
        Ok(())
    }),
    (&["replay_time_scale"], |s, v| {
        let n = v.int()?;
        if !(1..=1_000_000).contains(&n) {
            return Err(v.err(format!(
                "{n}: a percentage from 1 to 1000000 (200 replays twice as fast)"
            )));
        }
        s.replay.time_scale_pct = n;
        Ok(())
    }),
    (&["replay_redirect"], |s, v| {
        s.replay.redirect = Some(v.need()?.to_string());
        Ok(())
    }),
    (&["replay_align"], |s, v| {
        let n = v.size()?;
        if n != 0 && !n.is_power_of_two() {
            return Err(v.err(format!("{n} is not a power of two")));
        }
        s.replay.align = n;
        Ok(())
    }),
    (&["replay_scale"], |s, v| {
        let n = v.int()?;
        if n == 0 {
            return Err(v.err("must be at least 1"));
        }
        s.replay.scale = n;
        Ok(())
    }),
    (&["replay_skip"], |s, v| {
        let mut m = 0u8;
        for d in v.need()?.split(',') {
            m |= match d.trim().to_ascii_lowercase().as_str() {
                "read" => 1 << Dir::Read as u8,
                "write" => 1 << Dir::Write as u8,
                "trim" => 1 << Dir::Trim as u8,
                "sync" => 1 << 3,
                o => {
                    return Err(v.err(format!("{o:?}: replay_skip takes read, write, trim, sync")));
                }
            };
        }
        s.replay.skip = m;
        Ok(())
    }),
];
