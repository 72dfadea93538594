//! Options that say what a job reports and logs: percentiles, averaging
//! intervals, latency figures, log files, the I/O log it writes.

use super::Opt;

/// The reporting and logging options, under each name fio accepts for them.
pub(super) const OPTIONS: &[Opt] = &[
    (&["log_avg_msec"], |s, v| {
        let n = v.int()?;
        if n == 0 {
            return Err(v.err("0 (one log entry per I/O) is not supported; give an interval in ms"));
        }
        s.log_avg_msec = n;
        Ok(())
    }),
    (&["write_bw_log"], |s, v| {
        s.write_bw_log = Some(v.text_or("").to_string());
        Ok(())
    }),
    (&["write_lat_log"], |s, v| {
        s.write_lat_log = Some(v.text_or("").to_string());
        Ok(())
    }),
    (&["write_iops_log"], |s, v| {
        s.write_iops_log = Some(v.text_or("").to_string());
        Ok(())
    }),
    (&["write_hist_log"], |s, v| {
        s.write_hist_log = Some(v.text_or("").to_string());
        Ok(())
    }),
    (&["log_hist_msec"], |s, v| {
        s.log_hist_msec = v.int()?;
        Ok(())
    }),
    (&["log_hist_coarseness"], |s, v| {
        let n = v.int()?;
        if n > 6 {
            return Err(v.err(format!("{n}: allowed range 0..=6")));
        }
        s.log_hist_coarseness = n as u32;
        Ok(())
    }),
    (&["log_offset"], |s, v| {
        s.log_offset = v.flag()?;
        Ok(())
    }),
    (&["per_job_logs"], |s, v| {
        s.per_job_logs = v.flag()?;
        Ok(())
    }),
    (&["write_iolog"], |s, v| {
        s.write_iolog = Some(v.need()?.to_string());
        Ok(())
    }),
    (&["group_reporting"], |s, v| {
        s.group_reporting = v.flag()?;
        Ok(())
    }),
    (&["percentile_list"], |s, v| {
        let t = v.need()?;
        let mut list = Vec::new();
        for p in t.split(':') {
            let x: f64 = p
                .trim()
                .parse()
                .map_err(|_| v.err(format!("{p:?} is not a number")))?;
            if !(0.0..=100.0).contains(&x) {
                return Err(v.err(format!("{x}: percentiles must be 0..=100")));
            }
            list.push(x);
        }
        if list.is_empty() || list.len() > 64 {
            return Err(v.err("give 1 to 64 percentiles"));
        }
        s.percentiles = list;
        Ok(())
    }),
    (&["bwavgtime", "iopsavgtime"], |s, v| {
        let n = v.int()?;
        if n == 0 {
            return Err(v.err("give an interval of at least 1 ms"));
        }
        if v.name == "bwavgtime" {
            s.bwavgtime_ms = Some(n);
        } else {
            s.iopsavgtime_ms = Some(n);
        }
        Ok(())
    }),
    (&["clat_percentiles"], |s, v| {
        s.clat_percentiles = v.flag()?;
        Ok(())
    }),
    (&["lat_percentiles"], |s, v| {
        s.lat_percentiles = v.flag()?;
        Ok(())
    }),
    (&["disable_clat"], |s, v| {
        s.disable_clat = v.flag()?;
        Ok(())
    }),
    (&["disable_lat"], |s, v| {
        s.disable_lat = v.flag()?;
        Ok(())
    }),
    (&["gtod_reduce"], |s, v| {
        if v.flag()? {
            s.disable_clat = true;
            s.disable_lat = true;
        }
        Ok(())
    }),
    (&["description"], |s, v| {
        s.description = Some(v.text_or("").to_string());
        Ok(())
    }),
];
