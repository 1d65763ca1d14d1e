//! Decode throughput (the llama-bench `-p 512 -n 128` / llama-batched-bench shape):
//! `cargo bench -p lse-engine --bench decode`. For each session count S in 1, 4, 8, 16: S sessions
//! each prefill a 512-token prompt, then decode 128 tokens together (one batched forward per step,
//! greedy); prints prefill and aggregate decode tokens/s. `LSE_BENCH_MODEL` (smollm2, gemma3,
//! qwen25coder), `LSE_BENCH_THREADS` (2), `LSE_BENCH_SESSIONS` ("1,4,8,16") and `LSE_BENCH_SIMD`
//! (the kernel level, e.g. avx2) choose the run; `LSE_BENCH_STEPS` (128) sets the decode length;
//! `LSE_BENCH_SAMPLE` samples with the default chain (temperature 0.8, top-k 40, top-p 0.95,
//! min-p 0.05; seeded) instead of greedy;
//! `LSE_BENCH_PRINT_STEPS` prints the first 24 step times (a one-off cost shows as a spike);
//! `LSE_BENCH_PROFILE` a step's pool runs by call site ([`lse_kernels::run_profile`]), and for one
//! session the share of the memory-bound speed a step could reach were its work besides the weight
//! matmuls overlapped with nothing;
//! `LSE_BENCH_PROMPT` (512) the prompt's tokens (1: llama-bench's tg128 shape, which decodes from
//! an empty context, so a step reads its weights and next to no K/V).
//! For one session it also prints the weight bytes a step streams (the packed matrices, LM head
//! included), the GB/s that makes, and this machine's read bandwidth on the same threads: the
//! memory-bound speed is bandwidth / bytes per step (and again with the file's bytes of the same
//! matrices, which the packed copies replace). Then it decodes again, each step followed by a
//! replay of its weight reads without the arithmetic ([`WeightReads`]), and prints the medians: the
//! speed no decode with the step's dispatches can pass, measured in the same minutes. When the
//! counts hold 1 and 8, it also steps one session and 8 sessions in turn and prints the ratio of
//! their median steps (8 sessions against one, in the same minutes), and, taken in the same turns,
//! replays of both steps' reads (weights and K/V): the speeds no step with its arithmetic can pass
//! here, and the ratio 8 sessions would reach if both steps ran at them.

#[path = "../../lse-kernels/benches/common/reads.rs"]
mod reads;
use reads::median;

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
    let prompt: u32 = std::env::var("LSE_BENCH_PROMPT").ok().and_then(|v| v.parse().ok()).unwrap_or(512).max(1);
    let sample = std::env::var_os("LSE_BENCH_SAMPLE").is_some();
    let simd = std::env::var("LSE_BENCH_SIMD").ok().filter(|s| !s.is_empty()).map(|s| lse_engine::parse_simd_level(&s).expect("LSE_BENCH_SIMD: avx512, avx2 or scalar"));
    // huge pages, as a server or --generate packs its weights
    let opts = EngineOptions { threads, kv_len: Some((prompt as usize + steps + 16).next_power_of_two()), simd, huge_pages: true, ..Default::default() };
    let engine = Engine::load(&path, opts).unwrap();
    let v = engine.n_vocab() as u32;
    let request = |k: usize| GenerateRequest {
        prompt: Prompt::Tokens((0..prompt).map(|i| (i * 7919 + 13 + 101 * k as u32) % v).collect()),
        max_tokens: steps as i64 + 1,
        ignore_eos: true,
        sampling: if sample { SamplingParams { seed: Some(k as u64), ..Default::default() } } else { SamplingParams { temperature: 0.0, ..Default::default() } },
        ..Default::default()
    };
    engine.generate(&GenerateRequest { max_tokens: 4, ..request(0) }).unwrap(); // warm-up: packs the weights
    for &s in &counts {
        let mut seqs: Vec<Sequence> = (0..s).map(|k| engine.start_sequence(&request(k)).unwrap()).collect();
        let t0 = Instant::now();
        prefill(&engine, &mut seqs);
        let prefill = t0.elapsed().as_secs_f64();
        let profile = std::env::var_os("LSE_BENCH_PROFILE").is_some();
        if profile {
            lse_kernels::run_profile::start();
        }
        let t1 = Instant::now();
        let mut step_s = Vec::new();
        while seqs.iter().any(|q| !q.is_done()) {
            step_s.push(timed_step(&engine, &mut seqs));
        }
        let steps = step_s.len();
        let besides_weights = profile.then(|| print_profile(&name, s, &step_s, lse_kernels::run_profile::stop()));
        if std::env::var_os("LSE_BENCH_PRINT_STEPS").is_some() {
            let first: Vec<f64> = step_s.iter().take(24).map(|x| (x * 1e4).round() / 10.0).collect();
            println!("{name} sessions {s}: first steps (ms) {first:?}");
        }
        let median_step = median(step_s);
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
            let file = engine.packed_source_bytes() as f64;
            println!(
                "{name}: the file's bytes of the same matrices {:.1} MB: memory-bound speed {:.1} steps/s, reached {:.0} %",
                file / 1e6,
                bw / file,
                100.0 * steps as f64 / decode / (bw / file)
            );
            if let Some(other) = besides_weights {
                let read = bytes / bw;
                println!(
                    "{name}: work besides the weight matmuls {:.3} ms a step; were the weights read at the read bandwidth \
                     ({:.3} ms) and that work overlapped with nothing, a step would reach {:.0} % of the memory-bound speed",
                    1e3 * other,
                    1e3 * read,
                    100.0 * read / (read + other)
                );
            }
            let reads = WeightReads::new(&path, threads, bytes as usize, 0);
            let (dec, rd) = interleaved(&engine, &request(0), &reads, steps);
            println!(
                "{name}: interleaved with a replay of its weight reads (same matrices, order, task split and \
                 barriers, no arithmetic), median of {steps}: decode step {:.2} ms ({:.1} GB/s), reads alone {:.2} ms \
                 ({:.1} GB/s): decode at {:.0} % of the read-bound speed",
                1e3 * dec,
                bytes / dec / 1e9,
                1e3 * rd,
                bytes / rd / 1e9,
                100.0 * rd / dec
            );
        }
        println!(
            "{name} threads {threads} sessions {s:2}: prefill {:.1} tok/s; decode {steps} steps, {tokens} tokens, {:.1} tok/s aggregate ({:.1} per session); median step {:.2} ms",
            prompt as f64 * s as f64 / prefill,
            tokens as f64 / decode,
            tokens as f64 / decode / s as f64,
            1e3 * median_step
        );
    }
    if counts.contains(&1) && counts.contains(&8) {
        let per_position = engine.session_bytes().unwrap().0;
        let reads = WeightReads::new(&path, threads, engine.weight_bytes().1, 8 * (prompt as usize + steps) * per_position);
        for block in [1, 16] {
            let t = alternating(&engine, &request, &reads, |s, at| s * (prompt as usize + at) * per_position, steps, block);
            let turns = if block == 1 { "in turn, step by step".to_string() } else { format!("in turn, {block} steps at a time (each turn's first step left out)") };
            println!(
                "{name}: 1 session, 8 sessions and replays of their reads (weights, then every session's K/V at \
                 its layer) {turns}: median step {:.2} / {:.2} ms, reads alone {:.2} / {:.2} ms (8 sessions' K/V \
                 {:.2} ms of it); 8 sessions decode \
                 {:.2}x the tokens/s of one; at their reads' speed they would decode {:.2}x one as measured, \
                 {:.2}x one at its reads' speed",
                1e3 * t[0],
                1e3 * t[1],
                1e3 * t[2],
                1e3 * t[3],
                1e3 * t[4],
                8.0 * t[0] / t[1],
                8.0 * t[0] / t[3],
                8.0 * t[2] / t[3]
            );
        }
    }
}

/// Median steps of one session and of 8 sessions and of the replays of their reads, taken in
/// turn `block` steps at a time (the 8-vs-1 ratio without the minute-to-minute swing of this
/// machine between two runs taken one after another). Step by step, every step finds the caches
/// holding the others' bytes; in blocks, a turn's later steps find their own, as a run of one
/// kind alone does (its first step is left out). `kv(sessions, step)` is the K/V bytes a step of
/// that many sessions reads.
fn alternating(
    engine: &Engine,
    request: &impl Fn(usize) -> GenerateRequest,
    reads: &WeightReads,
    kv: impl Fn(usize, usize) -> usize,
    steps: usize,
    block: usize,
) -> [f64; 5] {
    let mut one = vec![engine.start_sequence(&request(8)).unwrap()];
    let mut eight: Vec<Sequence> = (0..8).map(|k| engine.start_sequence(&request(k)).unwrap()).collect();
    prefill(engine, &mut one);
    prefill(engine, &mut eight);
    let mut t: [Vec<f64>; 5] = Default::default();
    for turn in 0..steps.div_ceil(block) {
        for kind in 0..4 {
            for j in 0..block.min(steps - turn * block) {
                let at = turn * block + j;
                let (s, kv_part) = match kind {
                    0 if !one[0].is_done() => (timed_step(engine, &mut one), None),
                    1 if !eight.iter().any(|q| q.is_done()) => (timed_step(engine, &mut eight), None),
                    2 => (reads.step(kv(1, at)).0, None),
                    3 => {
                        let (all, of_kv) = reads.step(kv(8, at));
                        (all, Some(of_kv))
                    }
                    _ => continue,
                };
                if block == 1 || j > 0 {
                    t[kind].push(s);
                    t[4].extend(kv_part);
                }
            }
        }
    }
    t.map(median)
}

/// Steps `seqs` until every prompt is in (each sequence's first token comes out of it).
fn prefill(engine: &Engine, seqs: &mut [Sequence]) {
    while seqs.iter().any(|q| q.prompt_left() > 0) {
        engine.step(&mut seqs.iter_mut().collect::<Vec<_>>(), 2048).unwrap();
    }
}

/// The pool runs of the decode steps by call site (ms a step; the calling thread's wait for the
/// workers at the ends of its runs, and its serial work before them) and the steps' time outside
/// any run; returns the seconds a step spends outside the packed matmuls' runs (attention, norms,
/// rope, cache writes, activation quantization, sampling).
fn print_profile(name: &str, sessions: usize, step_s: &[f64], sites: Vec<lse_kernels::run_profile::Site>) -> f64 {
    let (n, ms) = (step_s.len().max(1) as f64, |ns: u64, n: f64| ns as f64 / 1e6 / n);
    let total = step_s.iter().sum::<f64>() * 1e3 / n;
    println!("{name} sessions {sessions}: a step's pool runs by call site (mean of {n} steps, {total:.2} ms a step)");
    let (mut inside, mut matmuls) = (0.0, 0.0);
    for s in &sites {
        inside += ms(s.nanos, n);
        if s.file.ends_with("matmul_packed.rs") {
            matmuls += ms(s.nanos, n);
        }
        println!(
            "  {}:{}: {:.3} ms (caller waiting {:.3}; its serial work before: {:.3}), {:.1} runs, {:.1} tasks",
            s.file,
            s.line,
            ms(s.nanos, n),
            ms(s.wait_nanos, n),
            ms(s.gap_nanos, n),
            s.runs as f64 / n,
            s.tasks as f64 / n
        );
    }
    println!("  outside runs: {:.3} ms", total - inside);
    (total - matmuls) / 1e3
}

/// Seconds one step of `seqs` takes.
fn timed_step(engine: &Engine, seqs: &mut [Sequence]) -> f64 {
    let mut refs: Vec<&mut Sequence> = seqs.iter_mut().collect();
    let t = Instant::now();
    engine.step(&mut refs, 2048).unwrap();
    t.elapsed().as_secs_f64()
}

/// A decode step's weight reads with nothing else: every matrix one step multiplies (per layer
/// q/k/v, the attention output, gate/up, down; then the LM head), in that order, each read in one
/// pool dispatch split into 4 contiguous ranges per thread taken from one counter, plus one
/// dispatch per layer where attention runs, reading that layer's share of the sessions' K/V from
/// a buffer of its own (none for [`WeightReads::step`]'s 0). Sizes are the GGUF's, scaled to the
/// packed total.
struct WeightReads {
    words: Vec<usize>,
    buf: Vec<u64>,
    kv: Vec<u64>,
    n_layer: usize,
    pool: lse_kernels::ThreadPool,
}

impl WeightReads {
    /// Reads of a model's `packed` weight bytes and of up to `kv_bytes` of K/V a step.
    fn new(path: &std::path::Path, threads: usize, packed: usize, kv_bytes: usize) -> WeightReads {
        let file = lse_gguf::GgufFile::open(path).unwrap();
        let size = |n: &str| file.tensor(n).map_or(0, |t| t.n_bytes as usize);
        let n_layer = (0..).take_while(|i| file.tensor(&format!("blk.{i}.attn_norm.weight")).is_some()).count();
        let mut groups: Vec<usize> = Vec::new();
        for i in 0..n_layer {
            let g = |names: &[&str]| names.iter().map(|n| size(&format!("blk.{i}.{n}.weight"))).sum::<usize>();
            groups.extend([g(&["attn_q", "attn_k", "attn_v", "attn_qkv"]), 0, g(&["attn_output"]), g(&["ffn_gate", "ffn_up"]), g(&["ffn_down"])]);
        }
        groups.push(if size("output.weight") > 0 { size("output.weight") } else { size("token_embd.weight") });
        let total: usize = groups.iter().sum();
        let words: Vec<usize> = groups.iter().map(|&b| (b as f64 * packed as f64 / total as f64) as usize / 8).collect();
        let buf = reads::words(words.iter().sum::<usize>());
        let kv = reads::words(kv_bytes / 8);
        WeightReads { words, buf, kv, n_layer, pool: lse_kernels::ThreadPool::new(threads) }
    }

    /// Seconds one step's reads take, with `kv_bytes` of K/V (at most the capacity given to `new`),
    /// and the seconds of those K/V reads among them.
    fn step(&self, kv_bytes: usize) -> (f64, f64) {
        let tasks = 4 * self.pool.threads();
        let layer_kv = (kv_bytes / 8 / self.n_layer.max(1)).min(self.kv.len() / self.n_layer.max(1));
        let t0 = Instant::now();
        let (mut at, mut kv) = (0, 0.0);
        for (i, &w) in self.words.iter().enumerate() {
            if i % 5 == 1 && i / 5 < self.n_layer {
                let (l, t) = (i / 5, Instant::now());
                reads::read_split(&self.pool, &self.kv[l * layer_kv..(l + 1) * layer_kv], tasks);
                kv += t.elapsed().as_secs_f64();
            } else {
                reads::read_split(&self.pool, &self.buf[at..at + w], tasks);
            }
            at += w;
        }
        (t0.elapsed().as_secs_f64(), kv)
    }
}

/// Medians of (decode step, the step's weight reads alone) over `steps` steps of one session,
/// each step followed by a replay of its reads: both see the same minutes of this machine's
/// memory bandwidth, which swings by a third from minute to minute on a shared host.
fn interleaved(engine: &Engine, request: &GenerateRequest, reads: &WeightReads, steps: usize) -> (f64, f64) {
    let mut seq = [engine.start_sequence(request).unwrap()];
    prefill(engine, &mut seq);
    let (mut dec, mut rd) = (Vec::new(), Vec::new());
    for _ in 0..steps {
        if seq[0].is_done() {
            break;
        }
        dec.push(timed_step(engine, &mut seq));
        rd.push(reads.step(0).0);
    }
    (median(dec), median(rd))
}

/// Bytes/s of reading a 1 GiB buffer, split over `threads` threads (best of 5 passes).
fn read_bandwidth(threads: usize) -> f64 {
    const LEN: usize = 1 << 27; // u64s
    let buf = reads::words(LEN);
    let chunk = LEN.div_ceil(threads);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = Instant::now();
        std::thread::scope(|sc| {
            for part in buf.chunks(chunk) {
                sc.spawn(move || std::hint::black_box(reads::sum_words(part)));
            }
        });
        best = best.min(t0.elapsed().as_secs_f64());
    }
    (LEN * 8) as f64 / best
}
