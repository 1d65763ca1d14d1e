//! Decode attention throughput (plain `main`: `cargo bench -p lse-kernels --bench attention`): S
//! sessions, one query row each, over `LSE_BENCH_CTX` (600) cached positions of f16 K/V in the
//! tiled mirror, for every layer of a SmolLM2-shaped model (30 layers, 9 query heads over 3 KV
//! heads of 64 dims; `LSE_BENCH_SHAPE=gemma3` for 18 layers, 4 over 1 of 256). Each layer's
//! sessions have their own mirrors, so a step streams all of their bytes as decode does. Prints
//! the time per step and the K/V GB/s. `LSE_BENCH_THREADS` (2), `LSE_BENCH_SESSIONS` ("1,8"),
//! `LSE_BENCH_SIMD` (level cap); `LSE_BENCH_NQ` (1) query rows per session, the last of the
//! context (a prefill's causal rows when it equals the context).

use lse_kernels::attention::{attention_batch, AttnJob, AttnKind, AttnShape, KvView, TiledMirror};
use lse_kernels::{Dialect, GgmlType, ThreadPool};
use std::time::Instant;

#[path = "../tests/common/mod.rs"]
mod common;
use common::Rng;

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    common::cap_simd_from_env();
    let (layers, n_head, hk, dim) = match std::env::var("LSE_BENCH_SHAPE").as_deref() {
        Ok("gemma3") => (18, 4, 1, 256),
        _ => (30, 9, 3, 64),
    };
    let ctx: usize = env("LSE_BENCH_CTX", 600);
    let threads: usize = env("LSE_BENCH_THREADS", 2);
    // query rows per session: 1 is decode; more are the last rows of a prefill
    let n_q: usize = env("LSE_BENCH_NQ", 1).clamp(1, ctx);
    let pool = ThreadPool::new(threads);
    let counts: Vec<usize> =
        std::env::var("LSE_BENCH_SESSIONS").unwrap_or("1,8".into()).split(',').filter_map(|s| s.trim().parse().ok()).collect();
    let row = hk * dim * 2;
    let ty = if std::env::var("LSE_BENCH_F32").is_ok() { GgmlType::BF16 } else { GgmlType::F16 };
    // f16 values in [-1, 1)
    let mut rng = Rng::new(0x9e37_79b9);
    let mut next = move || rng.unit() * 2.0 - 1.0;
    for &s in &counts {
        let cache: Vec<Vec<u8>> = (0..layers * s)
            .map(|_| (0..ctx * row / 2).flat_map(|_| lse_kernels::f32_to_f16(next()).to_le_bytes()).collect())
            .collect();
        let mirrors: Vec<TiledMirror> = cache
            .iter()
            .map(|c| {
                let mut m = TiledMirror::new(hk, dim, dim);
                m.update(ty, c, c, dim * 2, dim * 2, 0, ctx);
                m
            })
            .collect();
        let q: Vec<f32> = (0..n_q * n_head * dim).map(|_| next()).collect();
        let mut outs = vec![vec![0f32; n_q * n_head * dim]; s];
        let shape = AttnShape { n_q, q_pos0: ctx - n_q, n_head, scale: 1.0 / (dim as f32).sqrt(), window: None };
        let mut step = || {
            for l in 0..layers {
                let mut jobs: Vec<AttnJob> = outs
                    .iter_mut()
                    .enumerate()
                    .map(|(i, out)| {
                        let c = &cache[l * s + i];
                        AttnJob {
                            shape,
                            q: &q,
                            kv: KvView {
                                ty,
                                k: c,
                                v: c,
                                n_head_kv: hk,
                                head_dim_k: dim,
                                head_dim_v: dim,
                                mirror: Some(mirrors[l * s + i].view()),
                            },
                            out,
                        }
                    })
                    .collect();
                attention_batch(Dialect::Simd, &pool, AttnKind::Flash, &mut jobs).unwrap();
            }
        };
        step();
        // steps per measurement: about 0.2 s
        let t = Instant::now();
        step();
        let reps = ((0.2 / t.elapsed().as_secs_f64()) as usize).clamp(3, 100_000);
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                step();
            }
            best = best.min(t.elapsed().as_secs_f64() / reps as f64);
        }
        let bytes = (layers * s * ctx * row * 2) as f64;
        println!(
            "sessions {s}: {:.3} ms per step over {ctx} positions, {:.1} MB of K/V, {:.1} GB/s ({threads} threads, {})",
            best * 1e3,
            bytes / 1e6,
            bytes / best / 1e9,
            lse_kernels::device_arch(Dialect::Simd)
        );
    }
}
