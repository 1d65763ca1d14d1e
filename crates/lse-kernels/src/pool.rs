//! A long-lived thread pool for data-parallel kernels.
//!
//! `run(n_tasks, f)` hands out task indices `0..n_tasks` from one atomic counter to the parked
//! workers and to the calling thread, and returns when every task has finished. Workers spin
//! briefly after a job (consecutive matmuls follow each other closely), then park on a condvar;
//! a run signals a condvar only when someone is parked on it (a decode step runs ~150 jobs; a
//! futex call at each start and end made 95k system calls in a 300-step SmolLM2 run, now 2.7k).
//! A run allocates nothing. A panic in a task is caught and re-raised on the calling thread.
//! A `run` issued from inside a task of the same pool runs its tasks inline (no deadlock).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

type Job = dyn Fn(usize) + Sync;

/// Spin iterations (`pause`, ~25 ns each on Zen 4) a worker waits for the next job, and the
/// caller for the workers, before parking. Short on purpose: on a shared (oversubscribed)
/// machine every spinning cycle is taken from a thread that has work; measured on 2 busy cores
/// (SmolLM2 4 chunks, 2 threads): 1k spins 3.7 s wall, 10k 4.6 s, 100k 14.5 s.
/// `LSE_SPIN` overrides (for experiments).
fn spin_iters() -> u32 {
    static N: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("LSE_SPIN")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(1_000)
    })
}

struct Shared {
    /// Job generation; bumped (under `lock`) for every run and for shutdown.
    generation: AtomicUsize,
    /// The job of the current generation (a borrowed closure, valid while `run` waits).
    job: Mutex<Option<JobPtr>>,
    n_tasks: AtomicUsize,
    next: AtomicUsize,
    /// Workers still inside the current job.
    busy: AtomicUsize,
    /// Workers parked (or about to park) on `wake`; counted under `lock` before parking.
    sleepers: AtomicUsize,
    /// Whether the caller of the current run is parked (or about to park) on `done`.
    caller_parked: AtomicBool,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    done_lock: Mutex<()>,
    done: Condvar,
}

#[derive(Clone, Copy)]
struct JobPtr(*const Job);
// SAFETY: the pointee is `Sync` and outlives every use (run waits for all workers).
unsafe impl Send for JobPtr {}
unsafe impl Sync for JobPtr {}

thread_local! {
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

/// A fixed set of worker threads living as long as the pool.
pub struct ThreadPool {
    threads: usize,
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serialises concurrent `run` calls from different threads.
    run_lock: Mutex<()>,
}

impl ThreadPool {
    /// A pool with `threads` threads in all, the caller included (`threads - 1` workers are
    /// spawned). `0` is treated as 1; with 1 every run executes inline.
    pub fn new(threads: usize) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicUsize::new(0),
            job: Mutex::new(None),
            n_tasks: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            caller_parked: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            done_lock: Mutex::new(()),
            done: Condvar::new(),
        });
        let workers = (1..threads)
            .map(|i| {
                let s = Arc::clone(&shared);
                std::thread::Builder::new()
                    .name(format!("lse-worker-{i}"))
                    .spawn(move || worker_loop(&s))
                    .expect("spawn pool worker")
            })
            .collect();
        ThreadPool {
            threads,
            shared,
            workers,
            run_lock: Mutex::new(()),
        }
    }

    /// Threads working on a run, the caller included.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f(i)` for every `i` in `0..n_tasks` across the pool; returns when all are done.
    /// Task order is unspecified. Panics (after all tasks ended) if a task panicked.
    pub fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        if n_tasks == 0 {
            return;
        }
        if self.threads == 1 || n_tasks == 1 || IN_TASK.with(|t| t.get()) {
            for i in 0..n_tasks {
                f(i);
            }
            return;
        }
        let _serial = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only for the duration of this call: we wait below until
        // no worker is inside the job any more, and clear the pointer before returning.
        let ptr: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static Job>(f) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobPtr(ptr));
        s.n_tasks.store(n_tasks, Ordering::Relaxed);
        s.next.store(0, Ordering::Relaxed);
        s.panicked.store(false, Ordering::Relaxed);
        s.busy.store(self.workers.len(), Ordering::Release);
        // SeqCst pairs with the parking worker's: it counts itself in `sleepers` and then reads
        // `generation`, so either it sees the new job or we see it and notify (under `lock`, which
        // it holds until it waits).
        s.generation.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        // The caller works too.
        let caller = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            IN_TASK.with(|t| t.set(true));
            work(s, f);
            IN_TASK.with(|t| t.set(false));
        }));
        IN_TASK.with(|t| t.set(false));
        if caller.is_err() {
            s.panicked.store(true, Ordering::Relaxed);
            // Let the others skip the remaining tasks.
            s.next.store(usize::MAX / 2, Ordering::Relaxed);
        }
        // Wait for the workers to leave the job.
        let mut spins = 0u32;
        while s.busy.load(Ordering::Acquire) != 0 {
            if spins < spin_iters() {
                spins += 1;
                std::hint::spin_loop();
            } else {
                // the same pairing as the workers' parking, with the last worker's `busy` update
                let g = s.done_lock.lock().unwrap_or_else(|e| e.into_inner());
                s.caller_parked.store(true, Ordering::SeqCst);
                if s.busy.load(Ordering::SeqCst) != 0 {
                    let _g = s.done.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.caller_parked.store(false, Ordering::SeqCst);
            }
        }
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if s.panicked.load(Ordering::Relaxed) {
            panic!("a ThreadPool task panicked");
        }
    }
}

fn work(s: &Shared, f: &(dyn Fn(usize) + Sync + '_)) {
    let n = s.n_tasks.load(Ordering::Relaxed);
    loop {
        let i = s.next.fetch_add(1, Ordering::Relaxed);
        if i >= n {
            break;
        }
        f(i);
    }
}

fn worker_loop(s: &Shared) {
    let mut seen = 0usize;
    loop {
        // Wait for a new generation: spin, then park.
        let mut spins = 0u32;
        loop {
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if spins < spin_iters() {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            let guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.sleepers.fetch_add(1, Ordering::SeqCst);
            if s.generation.load(Ordering::SeqCst) == seen {
                let _g = s.wake.wait(guard).unwrap_or_else(|e| e.into_inner());
            }
            s.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(JobPtr(ptr)) = job {
            // SAFETY: `run` keeps the closure alive until `busy` drops to zero.
            let f: &Job = unsafe { &*ptr };
            IN_TASK.with(|t| t.set(true));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(s, f)));
            IN_TASK.with(|t| t.set(false));
            if r.is_err() {
                s.panicked.store(true, Ordering::Relaxed);
                s.next.store(usize::MAX / 2, Ordering::Relaxed);
            }
        }
        if s.busy.fetch_sub(1, Ordering::SeqCst) == 1 && s.caller_parked.load(Ordering::SeqCst) {
            let _g = s.done_lock.lock().unwrap_or_else(|e| e.into_inner());
            s.done.notify_all();
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        {
            let _g = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.generation.fetch_add(1, Ordering::AcqRel);
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl std::fmt::Debug for ThreadPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadPool")
            .field("threads", &self.threads)
            .finish()
    }
}
