//! The thread pool's contract: every task runs exactly once per run, whether the workers were
//! spinning, yielding or parked when it started; a thread runs its own share of neighbouring
//! tasks first; nested runs run inline; a task's panic reaches
//! the caller and leaves the pool usable; runs from several threads are serialised; a recorded run counts at its call site;
//! memory given to workers to fetch while they wait (even unmapped or absurd) changes none of that.

use lse_kernels::ThreadPool;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs `n` tasks and checks each index ran once.
fn run_counted(pool: &ThreadPool, n: usize) {
    let counts: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    pool.run(n, &|i| {
        counts[i].fetch_add(1, Ordering::Relaxed);
    });
    for (i, c) in counts.iter().enumerate() {
        assert_eq!(c.load(Ordering::Relaxed), 1, "task {i} of {n}");
    }
}

#[test]
fn every_task_runs_once_back_to_back() {
    for threads in [1, 2, 3, 4] {
        let pool = ThreadPool::new(threads);
        assert_eq!(pool.threads(), threads);
        for round in 0..2000 {
            run_counted(&pool, round % 37);
        }
        run_counted(&pool, 1000);
    }
}

/// The caller starts on the first share, in order: with 2 threads and 8 tasks of 5 ms it runs
/// tasks 0 and 1 first (where one counter served both threads the awake worker took task 1).
/// Only a caller held off the CPU for the 20 ms of the worker's own share could see otherwise.
#[test]
fn the_caller_runs_the_first_share_in_order() {
    let pool = ThreadPool::new(2);
    for _ in 0..3 {
        run_counted(&pool, 8); // the worker is awake (spinning) when the run below starts
        let caller = std::thread::current().id();
        let order = std::sync::Mutex::new(Vec::new());
        pool.run(8, &|i| {
            if std::thread::current().id() == caller {
                order.lock().unwrap().push(i);
            }
            std::thread::sleep(Duration::from_millis(5));
        });
        let order = order.into_inner().unwrap();
        assert_eq!(&order[..2], &[0, 1], "the caller's tasks: {order:?}");
    }
}

#[test]
fn runs_while_the_workers_fetch_ahead() {
    let bytes = vec![7u8; 3 << 20];
    let at = bytes.as_ptr() as usize;
    for threads in [2, 3] {
        let pool = ThreadPool::new(threads);
        for round in 0..300 {
            let range = match round % 4 {
                0 => at..at + bytes.len(),
                1 => 64..1 << 40, // unmapped, and longer than any range is asked for
                2 => at + 4096..at,
                _ => 0..0,
            };
            for t in 0..threads + 1 {
                pool.fetch_while_idle(t, range.clone());
            }
            if round % 50 == 0 {
                std::thread::sleep(Duration::from_millis(5));
            }
            run_counted(&pool, round % 19);
        }
        // the workers still park and wake once every range is asked for
        std::thread::sleep(Duration::from_millis(15));
        run_counted(&pool, 8);
    }
}

#[test]
fn runs_after_the_workers_parked() {
    // Longer than the spin and the yield window: the workers (and, in the long task, the
    // caller) park and must be woken.
    let pool = ThreadPool::new(2);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(15));
        run_counted(&pool, 8);
        let done = AtomicUsize::new(0);
        pool.run(2, &|i| {
            if i == 1 {
                std::thread::sleep(Duration::from_millis(10));
            }
            done.fetch_add(1, Ordering::Relaxed);
        });
        assert_eq!(done.load(Ordering::Relaxed), 2);
    }
}

#[test]
fn runs_beside_a_busy_thread() {
    // Another runnable thread on the machine: waiters that yield hand it the CPU and then park.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            });
        }
        let pool = ThreadPool::new(2);
        for round in 0..300 {
            run_counted(&pool, 1 + round % 9);
        }
        stop.store(true, Ordering::Relaxed);
    });
}

#[test]
fn a_run_inside_a_task_runs_inline() {
    for threads in [1, 2, 4] {
        let pool = ThreadPool::new(threads);
        let total = AtomicUsize::new(0);
        pool.run(4, &|_| {
            pool.run(3, &|_| {
                total.fetch_add(1, Ordering::Relaxed);
            });
        });
        assert_eq!(total.load(Ordering::Relaxed), 12);
    }
}

#[test]
fn a_panicking_task_reaches_the_caller_and_the_pool_goes_on() {
    let pool = ThreadPool::new(2);
    for (n, bad) in [(6, 0), (6, 5), (64, 37)] {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.run(n, &|i| {
                if i == bad {
                    panic!("task {i} fails");
                }
            })
        }));
        assert!(r.is_err());
        run_counted(&pool, n);
    }
}

#[test]
fn runs_from_two_threads_are_serialised() {
    let pool = ThreadPool::new(2);
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| {
                for round in 0..500 {
                    run_counted(&pool, 1 + round % 13);
                }
            });
        }
    });
}

/// While recording, each top-level run counts at the line that called it (its tasks, its time, the
/// serial time before it); a run inside a task is part of its caller's run, not a site of its own.
#[test]
fn runs_are_profiled_by_call_site() {
    let pool = ThreadPool::new(2);
    lse_kernels::run_profile::start();
    let line = line!() + 3;
    for _ in 0..3 {
        std::thread::sleep(Duration::from_micros(200)); // serial work before each run
        pool.run(4, &|_| pool.run(2, &|_| std::thread::sleep(Duration::from_micros(50))));
    }
    let sites = lse_kernels::run_profile::stop();
    pool.run(4, &|_| {});
    // (the other tests of this file run beside this one, and their runs are recorded too)
    let here: Vec<_> = sites.iter().filter(|s| s.file.ends_with("tests/pool.rs") && s.line >= line - 2 && s.line <= line + 2).collect();
    assert_eq!(here.len(), 1, "the inner run is no site of its own: {here:?}");
    let s = here[0];
    assert_eq!((s.line, s.runs, s.tasks), (line, 3, 12));
    // 3 runs of 4 tasks of 2 × 50 µs on 2 threads: at least 300 µs of wall time; the serial
    // 200 µs before the second and third runs (the first one's has no run before it)
    assert!(s.nanos >= 300_000 && s.wait_nanos <= s.nanos, "{s:?}");
    assert!(s.gap_nanos >= 400_000 && s.gap_nanos < 400_000 + s.nanos + 100_000_000, "{s:?}");
}
