//! Packing a GGUF matrix into the tiles' layout, one thread, ns per weight (the first use of a
//! model packs every matrix: a server's first request and every scoring run pay it):
//! `cargo bench -p lse-kernels --bench pack`. Best of `LSE_BENCH_ROUNDS` (5) per type; under
//! `valgrind --tool=callgrind` (one round) its instruction counts compare two builds on a busy machine.

#[path = "../tests/common/mod.rs"]
mod common;

use common::*;
use lse_kernels::{packable, GgmlType, PackedMatrix, ThreadPool};

fn main() {
    common::cap_simd_from_env();
    let pool = ThreadPool::new(1);
    let mut rng = Rng::new(7);
    let (n, k) = (2048, 1024);
    let rounds: usize = std::env::var("LSE_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    for t in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K] {
        if !packable(t) {
            continue;
        }
        let w = random_weights(&mut rng, t, n, k);
        let mut best = f64::MAX;
        for _ in 0..rounds {
            let t0 = std::time::Instant::now();
            let p = PackedMatrix::new(&pool, t, &w, n, k).unwrap();
            best = best.min(t0.elapsed().as_secs_f64());
            std::hint::black_box(p);
        }
        println!("{:5} {n} x {k}: {:.2} ns per weight", t.name(), best * 1e9 / (n * k) as f64);
    }
}
