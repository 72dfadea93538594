//! The drive during a guest run, sampled every second from the daemon's
//! counters on a thread of its own, each sample tagged with the phase
//! under way.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::progress::Progress;
use crate::results::DriveSample;
use crate::simrun::sample;
use vssd_guest::serve::ServeProcess;
use vssd_model::Counters;

/// The sampling thread.
pub(super) struct Sampler {
    phase_now: Arc<AtomicUsize>,
    samples: Arc<Mutex<Vec<DriveSample>>>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<()>,
}

impl Sampler {
    /// Samples `serve`'s drive every second, times from `start`; the
    /// progress display gets the drive's rate.
    pub(super) fn start(serve: &ServeProcess, start: Instant, progress: &Progress) -> Sampler {
        let phase_now = Arc::new(AtomicUsize::new(0));
        let samples: Arc<Mutex<Vec<DriveSample>>> = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (control, phase_now, samples, stop) = (
                serve.control.clone(),
                phase_now.clone(),
                samples.clone(),
                stop.clone(),
            );
            let bar = progress.clone();
            std::thread::spawn(move || {
                let mut last: Option<(Counters, Instant)> = None;
                while !stop.load(Ordering::SeqCst) {
                    if let Ok(r) = vssd_ctl::stats(&control) {
                        let now = Instant::now();
                        let c = r.counters;
                        let (prev, prev_at) = last.clone().unwrap_or_else(|| (c.clone(), now));
                        let s = sample(
                            phase_now.load(Ordering::SeqCst),
                            start.elapsed().as_secs_f64(),
                            &prev,
                            &c,
                        );
                        bar.rate(
                            (c.host_written_bytes + c.host_read_bytes)
                                .saturating_sub(prev.host_written_bytes + prev.host_read_bytes),
                            now.duration_since(prev_at).as_secs_f64(),
                        );
                        samples.lock().unwrap_or_else(|e| e.into_inner()).push(s);
                        last = Some((c, now));
                    }
                    std::thread::sleep(Duration::from_secs(1));
                }
            })
        };
        Sampler {
            phase_now,
            samples,
            stop,
            thread,
        }
    }

    /// Later samples belong to phase `i`.
    pub(super) fn set_phase(&self, i: usize) {
        self.phase_now.store(i, Ordering::SeqCst);
    }

    /// Stops the thread; the samples taken.
    pub(super) fn stop(self) -> Vec<DriveSample> {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.thread.join();
        Arc::try_unwrap(self.samples)
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()))
            .unwrap_or_default()
    }
}
