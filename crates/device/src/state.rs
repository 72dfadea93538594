//! The FTL state against the data: where the state came from when the
//! device opened, the dirty marker that tells a later start the state is
//! older than the data, saving the state, and block status that never
//! reports data as a hole.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

use super::files::{self, FileError};
use super::{Device, DeviceError};

/// Where the FTL state came from when the device opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateOrigin {
    /// The state file of the last clean exit.
    Saved,
    /// A state file older than the data (the daemon did not exit cleanly
    /// after it), or no state beside a backing file that holds data: the
    /// FTL is the old state or fresh, block status also asks the store.
    OlderThanData,
    /// A fresh drive: no state, no data.
    Fresh,
}

impl StateOrigin {
    /// What the daemon says about it at start-up.
    pub fn describe(self) -> &'static str {
        match self {
            StateOrigin::Saved => "loaded the saved FTL state",
            StateOrigin::OlderThanData => {
                "FTL state older than the data: block status also reports the backing file's allocated extents as data (timing starts from the older state)"
            }
            StateOrigin::Fresh => "fresh drive",
        }
    }
}

/// The marker that says the state file beside it is older than the data:
/// present from start-up until a clean exit saved the state again.
pub(crate) fn dirty_marker(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".dirty");
    PathBuf::from(p)
}

impl Device {
    /// `offset..offset+len` as runs of `(bytes, mapped)` in the FTL, at
    /// most `max_runs` (a TRIMmed or never-written run reads as zeros).
    pub fn allocation(&self, offset: u64, len: u64, max_runs: usize) -> Vec<(u64, bool)> {
        let ftl = self.lock().ssd.mapped_runs(offset, len, max_runs);
        if self.ftl_describes_data.load(Relaxed) {
            return ftl;
        }
        // The FTL may be older than the data: where it says unmapped, the
        // backing file's allocated extents are data all the same.
        let mut out: Vec<(u64, bool)> = Vec::new();
        let mut push = |n: u64, mapped: bool| match out.last_mut() {
            Some(last) if last.1 == mapped => last.0 += n,
            _ if n > 0 => out.push((n, mapped)),
            _ => {}
        };
        let mut at = offset;
        for (n, mapped) in ftl {
            if mapped {
                push(n, true);
            } else {
                match self.store.data_extents(at, n, max_runs.saturating_add(1)) {
                    Ok(Some(ext)) if ext.len() <= max_runs => {
                        let mut pos = at;
                        for (d, l) in ext {
                            push(d - pos, false);
                            push(l, true);
                            pos = d + l;
                        }
                        push(at + n - pos, false);
                    }
                    Ok(None) => push(n, false),
                    // Too fragmented to list, or unknown: say data.
                    _ => push(n, true),
                }
            }
            at += n;
        }
        out.truncate(max_runs.max(1));
        out
    }

    /// Write the FTL state file atomically (private temp file, fsync,
    /// rename). Refused once the drive has stopped: the last good state
    /// stays on disk.
    pub fn save_state(&self) -> Result<(), DeviceError> {
        let Some(path) = &self.state_file else {
            return Ok(());
        };
        if let Some(why) = self.stopped() {
            return Err(DeviceError::Stopped(format!(
                "{why}; not saving its FTL state over {}",
                path.display()
            )));
        }
        let m = self.lock();
        files::write_atomically(path, |w| m.ssd.save(w)).map_err(|e| match e {
            FileError::Open { source, .. } => DeviceError::StateSave {
                path: path.clone(),
                source,
            },
            other => DeviceError::File(other),
        })
    }

    /// Sync the data and save the FTL state (clean shutdown); the saved
    /// state then describes the data again (the dirty marker goes).
    pub fn close(&self) -> Result<(), DeviceError> {
        self.store.sync().map_err(DeviceError::Io)?;
        self.save_state()?;
        if let Some(path) = &self.state_file {
            match std::fs::remove_file(dirty_marker(path)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(DeviceError::Io(e)),
            }
        }
        Ok(())
    }
}
