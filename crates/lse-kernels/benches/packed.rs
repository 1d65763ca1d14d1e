//! Packed (register-tiled) matmul against the row kernels, one thread, GFLOP/s:
//! `cargo bench -p lse-kernels --bench packed` (`LSE_BENCH_SIMD=avx2` caps the kernels to AVX2).
//! Each shape runs `LSE_BENCH_ROUNDS` (5) rounds of (roofline, packed tile) back to back and prints
//! the median and best of the per-round shares: on a shared machine the core's speed moves from
//! minute to minute, and a share of one peak measured at the start moved with it (55–80 % for the
//! same binary within an hour). `LSE_BENCH_TYPES` (e.g. `q6_k,q8_0`) runs only those types' shapes;
//! `LSE_BENCH_SHAPES` (e.g. `q6_k:640x512x512,q4_k:896x4864x512`, type:NxKxM) replaces the list.
//! Each tile is also held against its format's step alone (`roofline::step_gflops`): the
//! operations per block its format cannot avoid (multiplies, widenings, llama.cpp's f32 step per
//! 32-element block), on L1 bytes in the tile's best register shape, measured in the same round.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/roofline.rs"]
mod roofline;
#[path = "common/shapes.rs"]
mod shapes;

use common::*;
use lse_kernels::{matmul, matmul_packed, packable, Dialect, GgmlType, PackedMatrix, ThreadPool};

fn main() {
    common::cap_simd_from_env();
    if !packable(GgmlType::Q4_1) {
        return;
    }
    let peak = || match lse_kernels::simd::level() {
        lse_kernels::simd::Level::Avx512 => roofline::vnni_gflops().unwrap(),
        _ => roofline::avx2_gflops(),
    };
    let rounds: usize = std::env::var("LSE_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    println!("int8 roofline ({}): {:.0} GFLOP/s", lse_kernels::simd::level().name(), peak());
    // `LSE_BENCH_TYPES=q6_k,q8_0` runs only those types' shapes
    let only: Option<Vec<String>> = std::env::var("LSE_BENCH_TYPES").ok().map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()).collect());
    let pool = ThreadPool::new(1);
    let mut rng = Rng::new(3);
    let shapes = shapes::from_env(3).map(|v| v.into_iter().map(|(t, d)| (t, d[0], d[1], d[2])).collect::<Vec<_>>());
    for (t, n, k, m) in shapes.unwrap_or(vec![
        (GgmlType::Q4_1, 1536, 576, 512),
        (GgmlType::Q4_1, 576, 1536, 512),
        (GgmlType::Q5_0, 2048, 640, 512),
        (GgmlType::Q8_0, 8192, 640, 128),
        (GgmlType::Q8_0, 8192, 640, 512),
        (GgmlType::Q5_0, 8192, 640, 128),
        (GgmlType::Q8_0, 2048, 640, 128),
        (GgmlType::Q8_0, 32768, 640, 128),
        (GgmlType::Q4_K, 2048, 1024, 512),
        (GgmlType::Q6_K, 640, 2048, 512),
    ]) {
        if only.as_ref().is_some_and(|o| !o.iter().any(|s| *s == t.name().to_ascii_lowercase())) {
            continue;
        }
        let w = random_weights(&mut rng, t, n, k);
        let x = random_acts(&mut rng, m, k);
        let p = PackedMatrix::new(&pool, t, &w, n, k).unwrap();
        let mut y = vec![0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let time = |f: &mut dyn FnMut()| {
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                f();
                best = best.min(t0.elapsed().as_secs_f64());
            }
            flops / best / 1e9
        };
        let a = time(&mut || matmul(Dialect::Simd, &pool, t, &w, n, k, &x, m, &mut y));
        // per round: (share of the peak, GFLOP/s, share of the format's step, the step)
        let mut shares: Vec<(f64, f64, f64, f64)> = (0..rounds)
            .map(|_| {
                let roof = peak();
                let step = roofline::step_gflops(roofline::Step::of(t));
                let b = time(&mut || matmul_packed(&pool, &p, &x, m, &mut y));
                (b / roof, b, b / step, step)
            })
            .collect();
        shares.sort_by(|u, v| u.0.total_cmp(&v.0));
        let (mid, best) = (shares[rounds / 2], shares[rounds - 1]);
        shares.sort_by(|u, v| u.2.total_cmp(&v.2));
        let smid = shares[rounds / 2];
        println!(
            "{:5} n={n} k={k} m={m}: row kernels {a:.0} GFLOP/s, packed {:.0} GFLOP/s = {:.0} % of the roofline \
             (median of {rounds} interleaved rounds; best {:.0} %), {:.0} % of its format's step alone ({:.0} GFLOP/s)",
            t.name(),
            mid.1,
            100.0 * mid.0,
            100.0 * best.0,
            100.0 * smid.2,
            smid.3
        );
    }
}
