//! Decode throughput (the llama-bench `-p 512 -n 128` / llama-batched-bench shape):
//! `cargo bench -p lse-engine --bench decode`. For each session count S in 1, 4, 8, 16: S sessions
//! each prefill a 512-token prompt, then decode 128 tokens together (one batched forward per step,
//! greedy); prints prefill and aggregate decode tokens/s. `LSE_BENCH_MODEL` (smollm2, gemma3,
//! qwen25coder), `LSE_BENCH_THREADS` (2), `LSE_BENCH_SESSIONS` ("1,4,8,16") and `LSE_BENCH_SIMD`
//! (the kernel level, e.g. avx2) choose the run; `LSE_BENCH_STEPS` (128) sets the decode length.
//! For one session it also prints the weight bytes a step streams (the packed matrices, LM head
//! included), the GB/s that makes, and this machine's read bandwidth on the same threads: the
//! memory-bound speed is bandwidth / bytes per step.

use lse_engine::{Engine, EngineOptions, GenerateRequest, Prompt, SamplingParams, Sequence};
use std::time::Instant;

fn main() {
    let name = std::env::var("LSE_BENCH_MODEL").unwrap_or("smollm2".into());
    let Some(path) = lse_testdata::model(&name) else { return };
    let threads = std::env::var("LSE_BENCH_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(2);
    let counts: Vec<usize> = std::env::var("LSE_BENCH_SESSIONS")
        .unwrap_or("1,4,8,16".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let steps: usize = std::env::var("LSE_BENCH_STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(128);
    let simd = std::env::var("LSE_BENCH_SIMD").ok().map(|s| lse_engine::parse_simd_level(&s).expect("LSE_BENCH_SIMD: avx512, avx2 or scalar"));
    let opts = EngineOptions { threads, kv_len: Some((512 + steps + 16).next_power_of_two()), simd, ..Default::default() };
    let engine = Engine::load(&path, opts).unwrap();
    let v = engine.n_vocab() as u32;
    let request = |k: usize| GenerateRequest {
        prompt: Prompt::Tokens((0..512u32).map(|i| (i * 7919 + 13 + 101 * k as u32) % v).collect()),
        max_tokens: steps as i64 + 1,
        ignore_eos: true,
        sampling: SamplingParams { temperature: 0.0, ..Default::default() },
        ..Default::default()
    };
    engine.generate(&GenerateRequest { max_tokens: 4, ..request(0) }).unwrap(); // warm-up: packs the weights
    for &s in &counts {
        let mut seqs: Vec<Sequence> = (0..s).map(|k| engine.start_sequence(&request(k)).unwrap()).collect();
        let t0 = Instant::now();
        // prefill every prompt (each sequence's first token comes out of it)
        while seqs.iter().any(|q| q.prompt_left() > 0) {
            let mut refs: Vec<&mut Sequence> = seqs.iter_mut().collect();
            engine.step(&mut refs, 2048).unwrap();
        }
        let prefill = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let mut steps = 0;
        while seqs.iter().any(|q| !q.is_done()) {
            let mut refs: Vec<&mut Sequence> = seqs.iter_mut().collect();
            engine.step(&mut refs, 2048).unwrap();
            steps += 1;
        }
        let decode = t1.elapsed().as_secs_f64();
        let tokens: usize = seqs.iter().map(|q| q.steps.len() - 1).sum();
        if s == 1 {
            let bytes = engine.weight_bytes().1 as f64;
            let bw = read_bandwidth(threads);
            println!(
                "{name}: {:.1} MB of packed weights per step, {:.1} GB/s at {:.1} steps/s; read bandwidth {:.1} GB/s \
                 ({threads} threads): memory-bound speed {:.1} steps/s, reached {:.0} %",
                bytes / 1e6,
                bytes * steps as f64 / decode / 1e9,
                steps as f64 / decode,
                bw / 1e9,
                bw / bytes,
                100.0 * steps as f64 / decode / (bw / bytes)
            );
        }
        println!(
            "{name} threads {threads} sessions {s:2}: prefill {:.1} tok/s; decode {steps} steps, {tokens} tokens, {:.1} tok/s aggregate ({:.1} per session)",
            512.0 * s as f64 / prefill,
            tokens as f64 / decode,
            tokens as f64 / decode / s as f64
        );
    }
}

/// Bytes/s of reading a 1 GiB buffer, split over `threads` threads (best of 5 passes).
fn read_bandwidth(threads: usize) -> f64 {
    const LEN: usize = 1 << 27; // u64s
    let buf: Vec<u64> = (0..LEN as u64).collect();
    let chunk = LEN.div_ceil(threads);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        std::thread::scope(|sc| {
            for part in buf.chunks(chunk) {
                sc.spawn(move || {
                    // four independent sums keep the loads, not the adds, the limit
                    let mut acc = [0u64; 4];
                    for c in part.chunks_exact(4) {
                        for i in 0..4 {
                            acc[i] = acc[i].wrapping_add(c[i]);
                        }
                    }
                    std::hint::black_box(acc);
                });
            }
        });
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (LEN * 8) as f64 / best
}
