//! A decode step's matmul: a few activation rows (one per decoding session) against packed
//! matrices larger together than the L3, as GB/s of packed weights streamed, beside a plain read
//! of the same bytes on the same pool (medians of 7 interleaved runs each), 1 and 2 threads:
//! `cargo bench -p lse-kernels --bench stream` (`LSE_BENCH_SIMD=avx2` caps the kernels to AVX2;
//! `LSE_BENCH_ROWS`, default "1,8", the activation rows; `LSE_BENCH_TYPES` picks formats;
//! `LSE_BENCH_SHAPES`, e.g. `q5_0:896x896,q8_0:151936x896`, type:NxK, replaces the shapes). Each
//! shape is packed as many times as it takes to pass twice the L3 (sysfs; 32 MiB when unknown)
//! and the runs go through the copies in turn, so every run reads its weights from memory, on
//! hosts with a large L3 too.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "common/reads.rs"]
mod reads;
#[path = "common/shapes.rs"]
mod shapes;
use reads::median;

use common::*;
use lse_kernels::{matmul_packed, packable, GgmlType, PackedMatrix, ThreadPool};
use std::time::Instant;

fn main() {
    common::cap_simd_from_env();
    if !packable(GgmlType::Q8_0) {
        return;
    }
    let l3 = l3_bytes();
    println!("packed matmul of a decode step against a plain read ({}), L3 {} MiB", lse_kernels::simd::level().name(), l3 >> 20);
    let mut rng = Rng::new(5);
    // Gemma-3's LM head, a Qwen2.5-Coder-sized Q5_0 matrix, a SmolLM2-width Q4_1 one, and the
    // k-quants of the Q4_K_M models
    let only: Option<Vec<String>> = std::env::var("LSE_BENCH_TYPES").ok().map(|v| v.split(',').map(|s| s.trim().to_ascii_lowercase()).collect());
    let rows: Vec<usize> = std::env::var("LSE_BENCH_ROWS").unwrap_or("1,8".into()).split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let shapes = shapes::from_env(2).map(|v| v.into_iter().map(|(t, d)| (t, d[0], d[1])).collect::<Vec<_>>());
    let shapes = shapes.unwrap_or(vec![(GgmlType::Q8_0, 262144, 640), (GgmlType::Q5_0, 65536, 1792), (GgmlType::Q4_1, 131072, 576), (GgmlType::Q4_K, 65536, 1024), (GgmlType::Q6_K, 32768, 2048)]);
    for (t, n, k) in shapes {
        if only.as_ref().is_some_and(|o| !o.iter().any(|s| *s == t.name().to_ascii_lowercase())) {
            continue;
        }
        let w = random_weights(&mut rng, t, n, k);
        for threads in [1, 2] {
            let pool = ThreadPool::new(threads);
            // on huge pages, as the engine packs what it decodes
            let pack = || PackedMatrix::new_releasing(&pool, t, &w, n, k, lse_kernels::pages::Pages::Huge(None), &|_| {}).unwrap();
            let first = pack();
            let copies = (2 * l3).div_ceil(first.size_bytes()).max(1);
            let mut ps = vec![first];
            ps.extend((1..copies).map(|_| pack()));
            let bytes = ps[0].size_bytes() as f64;
            let plain = reads::words(ps[0].size_bytes() * copies / 8);
            let parts: Vec<&[u64]> = plain.chunks(plain.len().div_ceil(copies)).collect();
            for &m in &rows {
                let x = random_acts(&mut rng, m, k);
                let mut y = vec![0f32; m * n];
                let (mut tile, mut read) = (Vec::new(), Vec::new());
                for r in 0..7 * copies {
                    let t0 = Instant::now();
                    matmul_packed(&pool, &ps[r % copies], &x, m, &mut y);
                    tile.push(t0.elapsed().as_secs_f64());
                    let t0 = Instant::now();
                    reads::read_split(&pool, parts[r % copies], 4 * threads);
                    read.push(t0.elapsed().as_secs_f64());
                }
                let (tile, read) = (bytes / median(tile) / 1e9, bytes / median(read) / 1e9);
                println!(
                    "{} {n} x {k}, {m} row(s), {threads} thread(s): {:.0} MB packed (x{copies}); tile {tile:.1} GB/s ({:.0} GFLOP/s), plain read {read:.1} GB/s ({:.0} %)",
                    t.name(),
                    bytes / 1e6,
                    tile * 2.0 * (m * n * k) as f64 / bytes,
                    100.0 * tile / read
                );
            }
        }
    }
}

/// The last-level cache of CPU 0 in bytes (sysfs), 32 MiB when it cannot be read.
fn l3_bytes() -> usize {
    let size = std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cache/index3/size").unwrap_or_default();
    let size = size.trim();
    let (digits, unit) = size.split_at(size.find(|c: char| !c.is_ascii_digit()).unwrap_or(size.len()));
    let scale = match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        _ => 1,
    };
    digits.parse::<usize>().map_or(32 << 20, |d| d * scale)
}
