//! A decode step's matmul: one activation row against a large packed matrix, as GB/s of packed
//! weights streamed, beside a plain read of the same number of bytes on the same pool (best of 9
//! interleaved runs each), 1 and 2 threads: `cargo bench -p lse-kernels --bench stream`
//! (`LSE_BENCH_SIMD=avx2` caps the kernels to AVX2).

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/reads.rs"]
mod reads;

use common::*;
use lse_kernels::{matmul_packed, packable, GgmlType, PackedMatrix, ThreadPool};
use std::time::Instant;

fn main() {
    common::cap_simd_from_env();
    if !packable(GgmlType::Q8_0) {
        return;
    }
    println!("one-row packed matmul against a plain read ({})", lse_kernels::simd::level().name());
    let mut rng = Rng::new(5);
    // Gemma-3's LM head, a Qwen2.5-Coder-sized Q5_0 matrix, a SmolLM2-width Q4_1 one, and the
    // k-quants of the Q4_K_M models (`LSE_BENCH_TYPES`, e.g. `q5_0,q6_k`, picks some)
    let only: Option<Vec<String>> = std::env::var("LSE_BENCH_TYPES").ok().map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()).collect());
    let shapes = [(GgmlType::Q8_0, 262144, 640), (GgmlType::Q5_0, 65536, 1792), (GgmlType::Q4_1, 131072, 576), (GgmlType::Q4_K, 65536, 1024), (GgmlType::Q6_K, 32768, 2048)];
    for (t, n, k) in shapes {
        if only.as_ref().is_some_and(|o| !o.iter().any(|s| *s == t.name().to_ascii_lowercase())) {
            continue;
        }
        let w = random_weights(&mut rng, t, n, k);
        let x = random_acts(&mut rng, 1, k);
        let mut y = vec![0f32; n];
        for threads in [1, 2] {
            let pool = ThreadPool::new(threads);
            let p = PackedMatrix::new(&pool, t, &w, n, k).unwrap();
            let bytes = p.size_bytes() as f64;
            let words = p.size_bytes() / 8;
            let plain: Vec<u64> = (0..words as u64).collect();
            let tasks = 4 * threads;
            let (mut tile, mut read) = (f64::MAX, f64::MAX);
            for _ in 0..9 {
                let t0 = Instant::now();
                matmul_packed(&pool, &p, &x, 1, &mut y);
                tile = tile.min(t0.elapsed().as_secs_f64());
                let t0 = Instant::now();
                reads::read_split(&pool, &plain, tasks);
                read = read.min(t0.elapsed().as_secs_f64());
            }
            let (tile, read) = (bytes / tile / 1e9, bytes / read / 1e9);
            println!(
                "{} {n} x {k}, {threads} thread(s): {:.0} MB packed; tile {tile:.1} GB/s, plain read {read:.1} GB/s ({:.0} %)",
                t.name(),
                bytes / 1e6,
                100.0 * tile / read
            );
        }
    }
}
