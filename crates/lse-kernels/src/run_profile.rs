//! Where a bench's parallel time goes, by call site: while recording, every [`crate::ThreadPool::run`]
//! adds its wall time, its tasks, how long its calling thread waited for the workers at the end and
//! the serial time since that thread's previous run to the line that called it. Off (one relaxed
//! load a run) unless a bench starts it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static ON: AtomicBool = AtomicBool::new(false);
static SITES: Mutex<Vec<Site>> = Mutex::new(Vec::new());
/// Counts the recordings, so a thread's last run of an earlier one starts no gap.
static RECORDING: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// When this thread's last recorded run ended, and in which recording.
    static LAST_END: Cell<Option<(u64, Instant)>> = const { Cell::new(None) };
}

/// The runs of one call site.
#[derive(Clone, Debug, Default)]
pub struct Site {
    pub file: &'static str,
    pub line: u32,
    pub runs: u64,
    pub tasks: u64,
    /// Wall time inside `run`, the calling thread's own tasks included.
    pub nanos: u64,
    /// Of that, the calling thread's wait for the workers after its last task.
    pub wait_nanos: u64,
    /// The calling thread's time since its previous recorded run ended: the serial work before
    /// this run (0 for the first run recorded on a thread).
    pub gap_nanos: u64,
}

/// Clears what was recorded and starts recording.
pub fn start() {
    SITES.lock().unwrap_or_else(|e| e.into_inner()).clear();
    RECORDING.fetch_add(1, Ordering::Relaxed);
    ON.store(true, Ordering::Relaxed);
}

/// Stops recording and returns the sites, in the order they first ran.
pub fn stop() -> Vec<Site> {
    ON.store(false, Ordering::Relaxed);
    std::mem::take(&mut *SITES.lock().unwrap_or_else(|e| e.into_inner()))
}

pub(crate) fn recording() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Adds a run that started at `t0` (and ends now) to its call site `at`.
pub(crate) fn add(at: &'static std::panic::Location<'static>, tasks: usize, t0: Instant, wait: Duration) {
    let (now, rec) = (Instant::now(), RECORDING.load(Ordering::Relaxed));
    let gap = match LAST_END.with(|l| l.replace(Some((rec, now)))) {
        Some((r, end)) if r == rec => t0.saturating_duration_since(end).as_nanos() as u64,
        _ => 0,
    };
    let mut sites = SITES.lock().unwrap_or_else(|e| e.into_inner());
    let i = match sites.iter().position(|s| s.line == at.line() && s.file == at.file()) {
        Some(i) => i,
        None => {
            sites.push(Site { file: at.file(), line: at.line(), ..Default::default() });
            sites.len() - 1
        }
    };
    let s = &mut sites[i];
    s.runs += 1;
    s.tasks += tasks as u64;
    s.nanos += (now - t0).as_nanos() as u64;
    s.wait_nanos += wait.as_nanos() as u64;
    s.gap_nanos += gap;
}
