//! Kernel throughput (plain `main`, run with `cargo bench -p lse-kernels`).
//!
//! * row kernel, weights in L2: GB/s of weight bytes through one SIMD row kernel, with 1 and 4
//!   4 and 8 activation rows per call (the 4/8-row figures count weight bytes × rows, i.e.
//!   bytes dotted).
//! * gemv from memory (m = 1, 1 thread): GB/s of weights.
//! * matmul m = 512 on the whole pool: GFLOP/s (2·m·n·k per call).
//!
//! `LSE_BENCH_THREADS` sets the pool size (default: available parallelism), `LSE_BENCH_SIMD` caps the
//! SIMD level (`avx2`, `avx512`, `scalar`), `LSE_BENCH_QUICK=1` shortens the runs, `LSE_BENCH_TYPES=q4_k,iq4_xs` picks types.

use lse_kernels::quant::{dot_type, quantize_activation};
use lse_kernels::simd::{self, MR};
use lse_kernels::{device_arch, matmul, Dialect, GgmlType, ThreadPool};
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

use common::{random_weights, Rng};

#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
fn cpu_time() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: CLOCK_PROCESS_CPUTIME_ID = 2 on Linux; ts is a valid out-pointer.
    unsafe { clock_gettime(2, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

/// CPU seconds used by this process (all threads) — the machine may be shared, so rates are
/// computed per CPU-second actually received, then scaled by the thread count. Elsewhere 0
/// (wall clock is used).
#[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
fn cpu_time() -> f64 {
    0.0
}

/// (wall seconds per call, CPU seconds per call): repeats `f` for at least `min` (after one
/// warm-up call).
fn time(min: Duration, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    let c0 = cpu_time();
    let mut iters = 0u32;
    while start.elapsed() < min || iters < 3 {
        f();
        iters += 1;
    }
    let wall = start.elapsed().as_secs_f64() / iters as f64;
    let cpu = (cpu_time() - c0) / iters as f64;
    if USE_CPU_TIME.load(std::sync::atomic::Ordering::Relaxed) && cpu > 0.0 {
        cpu / THREADS.load(std::sync::atomic::Ordering::Relaxed) as f64
    } else {
        wall
    }
}

static USE_CPU_TIME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);
static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

fn main() {
    common::cap_simd_from_env();
    let quick = std::env::var_os("LSE_BENCH_QUICK").is_some();
    let min = Duration::from_millis(if quick { 100 } else { 400 });
    let threads = std::env::var("LSE_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
    let pool = ThreadPool::new(threads);
    let one = ThreadPool::new(1);
    let use_cpu = std::env::var_os("LSE_BENCH_WALL").is_none();
    USE_CPU_TIME.store(use_cpu, std::sync::atomic::Ordering::Relaxed);
    println!(
        "lse-kernels bench: Dialect::Simd = {}, pool threads = {threads}",
        device_arch(Dialect::Simd)
    );
    println!(
        "timing: {} (LSE_BENCH_WALL=1 for wall clock)",
        if use_cpu {
            "process CPU time / threads, i.e. as if the cores were ours alone"
        } else {
            "wall clock"
        }
    );
    println!(
        "{:6} {:>16} {:>16} {:>14} {:>18} {:>18}",
        "type",
        "kern nx=1 GB/s",
        "nx=4 / nx=8 GB/s",
        "gemv GB/s",
        "matmul m=512 GF/s",
        "scalar m=512 GF/s"
    );
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    {
        use lse_kernels::quant::DotType;
        let k = 2048;
        let x: Vec<f32> = (0..64 * k).map(|_| rng.unit() - 0.5).collect();
        THREADS.store(1, std::sync::atomic::Ordering::Relaxed);
        let mut line = String::from("activation quantization, ns/element scalar/simd:");
        for dt in [
            DotType::Q8_0,
            DotType::Q8_1,
            DotType::Q8_K,
            DotType::F16,
            DotType::BF16,
        ] {
            let mut buf = vec![0u8; dt.row_bytes(k)];
            let t = time(min / 4, || {
                for r in 0..64 {
                    quantize_activation(dt, &x[r * k..(r + 1) * k], &mut buf);
                }
                black_box(&buf);
            });
            let tv = time(min / 4, || {
                for r in 0..64 {
                    simd::quantize_activation(
                        simd::level(),
                        simd::ActLayout::Ggml,
                        dt,
                        &x[r * k..(r + 1) * k],
                        &mut buf,
                    );
                }
                black_box(&buf);
            });
            line += &format!(
                " {dt:?} {:.2}/{:.2}",
                t / (64 * k) as f64 * 1e9,
                tv / (64 * k) as f64 * 1e9
            );
        }
        println!("{line}");
    }
    let types = lse_kernels::quant::FORMATS.iter().map(|f| f.ty);
    // LSE_BENCH_TYPES=iq4_xs,q4_k limits the run to those types
    let only = std::env::var("LSE_BENCH_TYPES").ok();
    let wanted = |t: GgmlType| only.as_deref().is_none_or(|o| o.split(',').any(|n| n == t.name()));
    for t in types.filter(|&t| wanted(t)) {
        let k = 2048;
        let rb = t.row_bytes(k).unwrap();
        let dt = dot_type(t).unwrap();
        let x: Vec<f32> = (0..512 * k).map(|_| rng.unit() - 0.5).collect();

        // Row kernel on L2-resident weights (32 rows).
        let (kn1, kn4) = match simd::row_kernel(simd::level(), t) {
            Some(simd::SimdKernel { kern, layout }) => {
                let rows = 32;
                let w = random_weights(&mut rng, t, rows, k);
                let xrb = simd::act_row_bytes(layout, dt, k);
                let mut xq = vec![0u8; MR * xrb];
                for j in 0..MR {
                    simd::quantize_activation(
                        simd::level(),
                        layout,
                        dt,
                        &x[j * k..(j + 1) * k],
                        &mut xq[j * xrb..(j + 1) * xrb],
                    );
                }
                let mut out = [0f32; MR];
                THREADS.store(1, std::sync::atomic::Ordering::Relaxed);
                let mut run = |nx: usize| {
                    time(min / 2, || {
                        for r in 0..rows {
                            kern(k, &w[r * rb..(r + 1) * rb], &xq, xrb, nx, &mut out);
                            black_box(&out);
                        }
                    })
                };
                let t1 = run(1);
                let t4 = run(4);
                let t8 = run(8);
                let bytes = (rows * rb) as f64;
                (
                    format!("{:.1}", bytes / t1 / 1e9),
                    format!(
                        "{:.1} / {:.1}",
                        4.0 * bytes / t4 / 1e9,
                        8.0 * bytes / t8 / 1e9
                    ),
                )
            }
            None => ("-".into(), "-".into()),
        };

        // gemv from memory: 64 MiB-ish of weights, 1 thread.
        let n_big = ((64usize << 20) / rb).max(1);
        let wbig = random_weights(&mut rng, t, n_big, k);
        let mut y = vec![0f32; 512 * n_big.max(1024)];
        THREADS.store(1, std::sync::atomic::Ordering::Relaxed);
        let tg = time(min, || {
            matmul(
                Dialect::Simd,
                &one,
                t,
                &wbig,
                n_big,
                k,
                &x[..k],
                1,
                &mut y[..n_big],
            )
        });
        let gemv = (n_big * rb) as f64 / tg / 1e9;
        drop(wbig);

        // matmul m = 512 on the pool.
        let (n, m) = (1024, 512);
        let w = random_weights(&mut rng, t, n, k);
        let flops = 2.0 * (m * n * k) as f64;
        THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
        let tm = time(min, || {
            matmul(Dialect::Simd, &pool, t, &w, n, k, &x, m, &mut y[..m * n])
        });
        let ts = if quick || !matches!(t, GgmlType::Q4_K | GgmlType::Q8_0) {
            None
        } else {
            Some(time(min, || {
                matmul(Dialect::Scalar, &pool, t, &w, n, k, &x, m, &mut y[..m * n])
            }))
        };
        println!(
            "{:6} {:>16} {:>16} {:>14.1} {:>18.1} {:>18}",
            t.name(),
            kn1,
            kn4,
            gemv,
            flops / tm / 1e9,
            ts.map(|s| format!("{:.1}", flops / s / 1e9))
                .unwrap_or_else(|| "-".into())
        );
    }

    // LM-head shapes of the test models (Q8_0 embeddings): 128 scored rows x 16384 vocab rows.
    THREADS.store(threads, std::sync::atomic::Ordering::Relaxed);
    let mut line = String::from("LM head (Q8_0, m=128, n=16384) GFLOP/s:");
    for (model, k) in [("smollm2", 576), ("gemma3", 640), ("qwen2.5", 896)] {
        let (n, m) = (16384, 128);
        let w = random_weights(&mut rng, GgmlType::Q8_0, n, k);
        let x: Vec<f32> = (0..m * k).map(|_| rng.unit() - 0.5).collect();
        let mut y = vec![0f32; m * n];
        let t = time(min, || {
            matmul(
                Dialect::Simd,
                &pool,
                GgmlType::Q8_0,
                &w,
                n,
                k,
                &x,
                m,
                &mut y,
            )
        });
        line += &format!(" {model} k={k}: {:.1}", 2.0 * (m * n * k) as f64 / t / 1e9);
    }
    println!("{line}");
}
