//! The FTL state against the data: where the state came from when the
//! device opened, the dirty marker that tells a later start the state is
//! older than the data, saving the state, and block status that never
//! reports data as a hole.

use std::io::{self, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use vssd_model::Ssd;
use vssd_profile::Profile;

use super::files::{self, FileError};
use super::store::Store;
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
fn dirty_marker(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".dirty");
    PathBuf::from(p)
}

/// The FTL state file and how the state in memory relates to the data.
pub(crate) struct StateFile {
    path: Option<PathBuf>,
    origin: StateOrigin,
    /// Whether the FTL state describes the data in the store: block status
    /// is then the FTL's alone. False after a start whose saved state is
    /// older than the data (a crash, or a backing file without state): the
    /// store's allocated extents then count as data too, so no range that
    /// holds data is ever reported as a hole. A secure erase makes it true.
    ftl_describes_data: AtomicBool,
}

impl StateFile {
    /// The model of a drive of `profile`: loaded from the state file at
    /// `path` if there is one (never silently replaced when it cannot be
    /// loaded), else fresh from `seed`.
    pub fn load(
        path: Option<&Path>,
        profile: &Profile,
        seed: u64,
    ) -> Result<(Ssd, bool), DeviceError> {
        match path {
            Some(path) if path.symlink_metadata().is_ok() => {
                let f = files::open_private_ro(path)?;
                let ssd = Ssd::load(profile, BufReader::new(f)).map_err(|source| {
                    DeviceError::StateLoad {
                        path: path.to_path_buf(),
                        source,
                    }
                })?;
                Ok((ssd, true))
            }
            _ => Ok((Ssd::new(profile, seed), false)),
        }
    }

    /// The state file at `path` (if any) of a drive of `capacity` bytes on
    /// `store` whose model was `loaded` from it: where the state came
    /// from, and the dirty marker that says it is older than the data
    /// until a clean exit.
    pub fn open(
        path: Option<PathBuf>,
        loaded: bool,
        store: &Store,
        capacity: u64,
    ) -> Result<StateFile, DeviceError> {
        let has_data = || {
            store
                .data_extents(0, capacity, 1)
                .map(|e| e.is_some_and(|e| !e.is_empty()))
                .unwrap_or(true)
        };
        let origin = match &path {
            Some(path) if loaded && dirty_marker(path).symlink_metadata().is_err() => {
                StateOrigin::Saved
            }
            _ if loaded || has_data() => StateOrigin::OlderThanData,
            _ => StateOrigin::Fresh,
        };
        if let Some(path) = &path {
            // Until a clean exit saves the state again, it is older than
            // the data: a crash from here on is seen at the next start.
            let marker = dirty_marker(path);
            files::write_atomically(&marker, |w| {
                use std::io::Write as _;
                w.write_all(
                    b"vssd is running: the FTL state beside this file is older than the data until a clean exit\n",
                )
            })?;
        }
        log::info!("{}", origin.describe());
        Ok(StateFile {
            path,
            ftl_describes_data: AtomicBool::new(origin != StateOrigin::OlderThanData),
            origin,
        })
    }

    /// Where the FTL state came from at open.
    pub fn origin(&self) -> StateOrigin {
        self.origin
    }

    /// The FTL describes the data again (a secure erase).
    pub fn describes_data(&self) {
        self.ftl_describes_data.store(true, Relaxed);
    }
}

impl Device {
    /// Where the FTL state came from at open.
    pub fn state_origin(&self) -> StateOrigin {
        self.state.origin()
    }

    /// `offset..offset+len` as runs of `(bytes, mapped)` in the FTL, at
    /// most `max_runs` (a TRIMmed or never-written run reads as zeros).
    pub fn allocation(&self, offset: u64, len: u64, max_runs: usize) -> Vec<(u64, bool)> {
        let ftl = self.drive.lock().ssd.mapped_runs(offset, len, max_runs);
        if self.state.ftl_describes_data.load(Relaxed) {
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
                match self
                    .drive
                    .store()
                    .data_extents(at, n, max_runs.saturating_add(1))
                {
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
        let Some(path) = &self.state.path else {
            return Ok(());
        };
        if let Some(why) = self.stopped() {
            return Err(DeviceError::Stopped(format!(
                "{why}; not saving its FTL state over {}",
                path.display()
            )));
        }
        let core = self.drive.lock();
        files::write_atomically(path, |w| core.ssd.save(w)).map_err(|e| match e {
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
        self.drive.store().sync().map_err(DeviceError::Io)?;
        self.save_state()?;
        if let Some(path) = &self.state.path {
            match std::fs::remove_file(dirty_marker(path)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(DeviceError::Io(e)),
            }
        }
        Ok(())
    }
}
