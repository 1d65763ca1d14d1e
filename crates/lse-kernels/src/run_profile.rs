//! Where a bench's parallel time goes, by call site: while recording, every [`crate::ThreadPool::run`]
//! adds its wall time, its tasks and how long its calling thread waited for the workers at the end
//! to the line that called it. Off (one relaxed load a run) unless a bench starts it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ON: AtomicBool = AtomicBool::new(false);
static SITES: Mutex<Vec<Site>> = Mutex::new(Vec::new());

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
}

/// Clears what was recorded and starts recording.
pub fn start() {
    SITES.lock().unwrap_or_else(|e| e.into_inner()).clear();
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

pub(crate) fn add(at: &'static std::panic::Location<'static>, tasks: usize, nanos: u64, wait_nanos: u64) {
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
    s.nanos += nanos;
    s.wait_nanos += wait_nanos;
}
