//! A long-lived thread pool for data-parallel kernels.
//!
//! `run(n_tasks, f)` hands out task indices `0..n_tasks` to the parked workers and to the
//! calling thread, and returns when every task has finished. Each thread starts on its own
//! contiguous share of the indices (the caller the first) and then takes what is left of the
//! others' (see [`work`]). Workers spin
//! briefly after a job (consecutive matmuls follow each other closely), then yield, then park
//! on a condvar (see [`Backoff`]);
//! a run signals a condvar only when someone is parked on it (a decode step runs ~150 jobs; a
//! futex call at each start and end made 95k system calls in a 300-step SmolLM2 run, now 2.7k).
//! A run allocates nothing. A panic in a task is caught and re-raised on the calling thread.
//! A waiting worker can be given bytes to ask for meanwhile ([`ThreadPool::fetch_while_idle`]).
//! A `run` issued from inside a task of the same pool runs its tasks inline (no deadlock).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Job = dyn Fn(usize) + Sync;

/// Spin iterations (`pause`: 16 ns on an Emerald Rapids Xeon, ~25 ns on Zen 4) a waiting thread takes
/// before it starts yielding. `LSE_SPIN` overrides (for experiments).
fn spin_iters() -> u32 {
    static N: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *N.get_or_init(|| env_number("LSE_SPIN", 1_000))
}

/// How long a waiting thread keeps its CPU with `sched_yield` after spinning, before it parks.
/// `LSE_YIELD_US` overrides (for experiments).
fn yield_window() -> Duration {
    static N: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    Duration::from_micros(*N.get_or_init(|| env_number("LSE_YIELD_US", 2_000)) as u64)
}

fn env_number(name: &str, default: u32) -> u32 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The wait of a thread for another thread's next move: spin, then yield, then park (when
/// [`Backoff::keep_waiting`] says no). A parked thread's vCPU halts, and on a virtual machine
/// the hypervisor takes tens of microseconds to milliseconds to run it again when it is woken
/// (SmolLM2 decode on a 2-vCPU guest: 80–133 tok/s parking after the spin, 154–192 never
/// parking). A yield that gives the CPU to nobody keeps it busy; once a yield has handed it to
/// another thread of this machine, every waiter parks straight after its spin for a while
/// (yielding to a busy machine gives the CPU away for a whole time slice, where a parked thread
/// that is woken runs again at once: 4-chunk scoring beside two busy loops took 5.7 s parking,
/// 7.5 s yielding).
struct Backoff {
    spins: u32,
    /// When the yielding began, and the thread's involuntary switches then.
    yielding: Option<(Instant, i64)>,
}

/// Until when (ns after [`epoch`]) waiters park without yielding: a yield ran another thread.
static YIELD_OFF_UNTIL: AtomicU64 = AtomicU64::new(0);
/// How long waiters park without yielding after a yield ran another thread.
const NO_YIELD: Duration = Duration::from_millis(100);

fn epoch() -> Instant {
    static E: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *E.get_or_init(Instant::now)
}

/// Times this thread was switched out while it could run (a yield that ran another thread
/// counts). Linux only; elsewhere 0, and waiters yield for the whole window.
fn involuntary_switches() -> i64 {
    #[cfg(target_os = "linux")]
    // SAFETY: getrusage writes the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut u);
        u.ru_nivcsw as i64
    }
    #[cfg(not(target_os = "linux"))]
    0
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { spins: 0, yielding: None }
    }

    /// Waits a little; false when the thread should park instead.
    fn keep_waiting(&mut self) -> bool {
        if self.spins < spin_iters() {
            self.spins += 1;
            std::hint::spin_loop();
            return true;
        }
        let now = Instant::now();
        let at = now.duration_since(epoch()).as_nanos() as u64;
        if at < YIELD_OFF_UNTIL.load(Ordering::Relaxed) {
            return false;
        }
        let (since, switches) = *self.yielding.get_or_insert_with(|| (now, involuntary_switches()));
        if now - since >= yield_window() {
            return false;
        }
        std::thread::yield_now();
        if involuntary_switches() != switches {
            YIELD_OFF_UNTIL.store(at + NO_YIELD.as_nanos() as u64, Ordering::Relaxed);
        }
        true
    }
}

struct Shared {
    /// Job generation; bumped (under `lock`) for every run and for shutdown.
    generation: AtomicUsize,
    /// The job of the current generation (a borrowed closure, valid while `run` waits).
    job: Mutex<Option<JobPtr>>,
    n_tasks: AtomicUsize,
    /// The next unclaimed task of each thread's share (thread 0 is the caller).
    next: Box<[Slot]>,
    /// Workers still inside the current job.
    busy: AtomicUsize,
    /// Workers parked (or about to park) on `wake`; counted under `lock` before parking.
    sleepers: AtomicUsize,
    /// Whether the caller of the current run is parked (or about to park) on `done`.
    caller_parked: AtomicBool,
    panicked: AtomicBool,
    shutdown: AtomicBool,
    /// What each worker asks for while it waits (index 0, the caller's, stays empty).
    idle: Box<[IdleFetch]>,
    lock: Mutex<()>,
    wake: Condvar,
    done_lock: Mutex<()>,
    done: Condvar,
}

/// The addresses `start .. end` a waiting worker is to ask for, published under a sequence
/// count (odd while being written), so the worker reads a pair that belongs together.
#[repr(align(128))]
struct IdleFetch {
    seq: AtomicUsize,
    start: AtomicUsize,
    end: AtomicUsize,
}

/// A worker's way through the range its [`IdleFetch`] last published.
#[derive(Default)]
struct IdleCursor {
    seq: usize,
    cur: usize,
    end: usize,
}

/// Cache lines a waiting worker asks for between two looks at the job generation.
const IDLE_LINES: usize = 16;
/// The most a range asks for (a torn pair from two publishers at once stays a hint this long).
const IDLE_MAX_BYTES: usize = 4 << 20;

impl IdleFetch {
    fn publish(&self, r: std::ops::Range<usize>) {
        self.seq.fetch_add(1, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::Release);
        self.start.store(r.start, Ordering::Relaxed);
        self.end.store(r.end, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// Asks (into L2) for the next [`IDLE_LINES`] lines of the published range; false when
    /// none are left.
    fn fetch_some(&self, c: &mut IdleCursor) -> bool {
        let seq = self.seq.load(Ordering::Acquire);
        if seq != c.seq {
            if seq % 2 == 1 {
                return true;
            }
            let (start, end) = (self.start.load(Ordering::Relaxed), self.end.load(Ordering::Relaxed));
            std::sync::atomic::fence(Ordering::Acquire);
            if self.seq.load(Ordering::Relaxed) != seq {
                return true;
            }
            *c = IdleCursor { seq, cur: start, end: end.min(start.saturating_add(IDLE_MAX_BYTES)) };
        }
        if c.cur >= c.end {
            return false;
        }
        let stop = c.end.min(c.cur + 64 * IDLE_LINES);
        #[cfg(target_arch = "x86_64")]
        for a in (c.cur..stop).step_by(64) {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
            // SAFETY: a prefetch is a hint; it never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(a as *const i8) };
        }
        c.cur = stop;
        true
    }
}

/// A counter on a cache line of its own, so that one thread's claims do not slow another's.
#[repr(align(128))]
struct Slot(AtomicUsize);

#[derive(Clone, Copy)]
struct JobPtr(*const Job);
// SAFETY: the pointee is `Sync` and outlives every use (run waits for all workers).
unsafe impl Send for JobPtr {}
unsafe impl Sync for JobPtr {}

thread_local! {
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
    /// Whether this thread is inside a run that [`crate::run_profile`] records.
    static PROFILED: Cell<bool> = const { Cell::new(false) };
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
            next: (0..threads).map(|_| Slot(AtomicUsize::new(0))).collect(),
            busy: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            caller_parked: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            idle: (0..threads).map(|_| IdleFetch { seq: AtomicUsize::new(0), start: AtomicUsize::new(0), end: AtomicUsize::new(0) }).collect(),
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
                    .spawn(move || worker_loop(&s, i))
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

    /// Has worker `t` (1 ..) ask for the memory at `addresses` (into L2, a line at a time)
    /// while it waits for a run (spinning or yielding; a parked worker asks for nothing), until
    /// it has asked for all of it or this is called again:
    /// what the next run will read first comes in while memory would idle through the
    /// caller's serial work. A hint that changes no result; an empty range cancels.
    pub fn fetch_while_idle(&self, t: usize, addresses: std::ops::Range<usize>) {
        if let Some(f) = self.shared.idle.get(t).filter(|_| t > 0) {
            f.publish(addresses);
        }
    }

    /// Runs `f(i)` for every `i` in `0..n_tasks` across the pool; returns when all are done.
    /// Task order is unspecified. Panics (after all tasks ended) if a task panicked.
    #[track_caller]
    pub fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        // a run inside another is part of that one's time
        if !crate::run_profile::recording() || IN_TASK.with(|t| t.get()) || PROFILED.with(|p| p.replace(true)) {
            self.run_tasks(n_tasks, f);
            return;
        }
        let (at, t0) = (std::panic::Location::caller(), Instant::now());
        let wait = self.run_tasks(n_tasks, f);
        PROFILED.with(|p| p.set(false));
        crate::run_profile::add(at, n_tasks, t0, wait);
    }

    /// [`ThreadPool::run`]; returns how long the calling thread waited for the workers.
    fn run_tasks(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Duration {
        if n_tasks == 0 {
            return Duration::ZERO;
        }
        if self.threads == 1 || n_tasks == 1 || IN_TASK.with(|t| t.get()) {
            for i in 0..n_tasks {
                f(i);
            }
            return Duration::ZERO;
        }
        let _serial = self.run_lock.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only for the duration of this call: we wait below until
        // no worker is inside the job any more, and clear the pointer before returning.
        let ptr: *const Job =
            unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static Job>(f) };
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobPtr(ptr));
        s.n_tasks.store(n_tasks, Ordering::Relaxed);
        for (t, slot) in s.next.iter().enumerate() {
            slot.0.store(share(t, s.next.len(), n_tasks).start, Ordering::Relaxed);
        }
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
            work(s, f, 0);
            IN_TASK.with(|t| t.set(false));
        }));
        IN_TASK.with(|t| t.set(false));
        if caller.is_err() {
            s.panicked.store(true, Ordering::Relaxed);
            skip_the_rest(s);
        }
        // Wait for the workers to leave the job.
        let waiting = Instant::now();
        let mut backoff = Backoff::new();
        while s.busy.load(Ordering::Acquire) != 0 {
            if !backoff.keep_waiting() {
                // the same pairing as the workers' parking, with the last worker's `busy` update
                let g = s.done_lock.lock().unwrap_or_else(|e| e.into_inner());
                s.caller_parked.store(true, Ordering::SeqCst);
                if s.busy.load(Ordering::SeqCst) != 0 {
                    let _g = s.done.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                s.caller_parked.store(false, Ordering::SeqCst);
            }
        }
        let waited = waiting.elapsed();
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if s.panicked.load(Ordering::Relaxed) {
            panic!("a ThreadPool task panicked");
        }
        waited
    }
}

/// Thread `t`'s share of `n` tasks among `threads`.
pub(crate) fn share(t: usize, threads: usize, n: usize) -> std::ops::Range<usize> {
    t * n / threads..(t + 1) * n / threads
}

/// Runs tasks for thread `me`: its own share first, in order, then what the others have not
/// claimed yet. A thread's tasks are then mostly neighbours, so where consecutive tasks read
/// consecutive memory (a decode step's weight groups) its stream and its prefetches run on
/// from one task into the next instead of restarting at every task; a slow thread's tasks
/// still go to whoever is free. Which thread runs a task changes none of its values.
fn work(s: &Shared, f: &(dyn Fn(usize) + Sync + '_), me: usize) {
    let (n, threads) = (s.n_tasks.load(Ordering::Relaxed), s.next.len());
    for u in (me..threads).chain(0..me) {
        let end = share(u, threads, n).end;
        loop {
            let i = s.next[u].0.fetch_add(1, Ordering::Relaxed);
            if i >= end {
                break;
            }
            f(i);
        }
    }
}

/// Lets every thread skip the tasks not yet claimed (after a panic).
fn skip_the_rest(s: &Shared) {
    for slot in s.next.iter() {
        slot.0.store(usize::MAX / 2, Ordering::Relaxed);
    }
}

fn worker_loop(s: &Shared, me: usize) {
    let mut seen = 0usize;
    let mut idle = IdleCursor::default();
    loop {
        // Wait for a new generation: spin, yield, then park.
        let mut backoff = Backoff::new();
        loop {
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if s.idle[me].fetch_some(&mut idle) {
                continue;
            }
            if backoff.keep_waiting() {
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
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(s, f, me)));
            IN_TASK.with(|t| t.set(false));
            if r.is_err() {
                s.panicked.store(true, Ordering::Relaxed);
                skip_the_rest(s);
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
