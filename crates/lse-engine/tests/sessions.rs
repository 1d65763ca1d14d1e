//! Sessions and the batched forward: a session's logits are bit-identical alone and sharing
//! passes with other sessions (prefill and decode rows mixed, any batch/ubatch split); decoding a
//! text one token at a time gives the logits of its one-pass prefill; truncate and reset rewind;
//! a generation started in a kept session (prefix reuse) is the one a new session gives.

use lse_engine::{Batch, Engine, EngineOptions, GenerateRequest, Prompt, SamplingParams, Sequence, Session};
use std::path::PathBuf;

fn synthetic(name: &str) -> PathBuf {
    lse_testdata::golden(&format!("synthetic/{name}.gguf"))
}

fn load(path: &std::path::Path, batch: usize, ubatch: usize) -> Engine {
    let o = EngineOptions { threads: 2, batch_size: batch, ubatch_size: ubatch, ..Default::default() };
    Engine::load(path, o).unwrap_or_else(|e| panic!("load {}: {e}", path.display()))
}

/// Deterministic token ids below `n_vocab`.
fn ids(seed: u64, n: usize, n_vocab: usize) -> Vec<u32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (n_vocab as u64 - 10) + 5) as u32
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Session 0's logits for `prompt` then each of `decode` fed one at a time, run alone.
fn alone(e: &Engine, prompt: &[u32], decode: &[u32]) -> Vec<Vec<u32>> {
    let mut s = e.new_session(None).unwrap();
    let mut out = Vec::new();
    let mut b = Batch::new();
    b.add_tokens(0, 0, prompt, |i| i + 1 == prompt.len());
    out.push(bits(&e.head_logits(&e.forward(&mut [&mut s], &b.rows).unwrap()).unwrap()));
    for &t in decode {
        let mut b = Batch::new();
        b.add_tokens(0, s.len(), &[t], |_| true);
        out.push(bits(&e.head_logits(&e.forward(&mut [&mut s], &b.rows).unwrap()).unwrap()));
    }
    out
}

/// The same as `alone`, but every pass also carries rows of 7 other sessions: some prefilling
/// long prompts in slices, some decoding; session 0 sits at a different place in each batch.
fn crowded(e: &Engine, prompt: &[u32], decode: &[u32]) -> Vec<Vec<u32>> {
    let v = e.n_vocab();
    let mut sessions: Vec<Session> = (0..8).map(|_| e.new_session(None).unwrap()).collect();
    let others: Vec<Vec<u32>> = (1..8).map(|k| ids(100 + k as u64, 30 + 17 * k, v)).collect();
    let mut fed = [0usize; 8];
    let mut out = Vec::new();
    for step in 0..=decode.len() {
        let mut b = Batch::new();
        // the others: a slice of their prompt, or one decode token once it is in
        for k in 1..8 {
            let p = &others[k - 1];
            let take = if fed[k] < p.len() { (p.len() - fed[k]).min(5 + 3 * k) } else { 1 };
            let toks: Vec<u32> = if fed[k] < p.len() { p[fed[k]..fed[k] + take].to_vec() } else { vec![ids(step as u64 + 7 * k as u64, 1, v)[0]] };
            if k == step % 7 + 1 {
                // session 0 goes in the middle of the batch this time
                if step == 0 {
                    b.add_tokens(0, 0, prompt, |i| i + 1 == prompt.len());
                } else {
                    b.add_tokens(0, sessions[0].len(), &decode[step - 1..step], |_| true);
                }
            }
            b.add_tokens(k, sessions[k].len(), &toks, |i| i + 1 == toks.len());
            fed[k] += toks.len().min(p.len().saturating_sub(fed[k]).max(1));
        }
        let want0 = b.rows.iter().position(|r| r.seq == 0 && r.output).unwrap();
        let n_before = b.rows[..want0].iter().filter(|r| r.output).count();
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let h = e.forward(&mut refs, &b.rows).unwrap();
        let logits = e.head_logits(&h).unwrap();
        out.push(bits(&logits[n_before * v..(n_before + 1) * v]));
    }
    out
}

fn check_invariance(path: &std::path::Path) {
    let reference = load(path, 2048, 512);
    let v = reference.n_vocab();
    let prompt = ids(1, 45, v);
    let decode = ids(2, 9, v);
    let want = alone(&reference, &prompt, &decode);
    for (batch, ubatch) in [(2048, 512), (64, 16), (37, 7)] {
        let e = load(path, batch, ubatch);
        assert!(alone(&e, &prompt, &decode) == want, "{}: batch {batch} / ubatch {ubatch} alone differs", path.display());
        let got = crowded(&e, &prompt, &decode);
        for (step, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g == w, "{}: batch {batch}/{ubatch}: step {step} differs beside 7 other sessions", path.display());
        }
    }
}

#[test]
fn synthetic_sessions_are_batch_invariant() {
    for name in ["llama-tiny", "llama-tiny-q4_0", "gemma3-tiny", "qwen2-tiny", "qwen3-tiny"] {
        check_invariance(&synthetic(name));
    }
}

#[test]
fn qwen35_sessions_are_invariant_to_other_sessions() {
    // recurrent layers: the split of a session's own rows is part of its arithmetic, so only the
    // crowd is varied here (same ubatch size, other sessions around)
    let e = load(&synthetic("qwen35-tiny"), 2048, 512);
    let v = e.n_vocab();
    let (prompt, decode) = (ids(1, 45, v), ids(2, 9, v));
    assert!(crowded(&e, &prompt, &decode) == alone(&e, &prompt, &decode));
}

#[test]
fn smollm2_sessions_are_batch_invariant() {
    let Some(m) = lse_testdata::model("smollm2") else { return };
    check_invariance(&m);
}

#[test]
fn truncate_and_reset_rewind_a_session() {
    let e = load(&synthetic("llama-tiny"), 2048, 512);
    let v = e.n_vocab();
    let (a, b) = (ids(3, 20, v), ids(4, 6, v));
    let run = |s: &mut Session, toks: &[u32]| {
        let mut batch = Batch::new();
        batch.add_tokens(0, s.len(), toks, |i| i + 1 == toks.len());
        bits(&e.head_logits(&e.forward(&mut [s], &batch.rows).unwrap()).unwrap())
    };
    let mut fresh = e.new_session(None).unwrap();
    run(&mut fresh, &a[..12]);
    let want = run(&mut fresh, &b);
    let mut s = e.new_session(None).unwrap();
    run(&mut s, &a);
    s.truncate(12).unwrap();
    assert_eq!(s.tokens(), &a[..12]);
    assert!(run(&mut s, &b) == want, "a truncated session differs from a fresh one with the same prefix");
    s.reset();
    assert!(s.is_empty());
    run(&mut s, &a[..12]);
    assert!(run(&mut s, &b) == want, "a reset session differs from a fresh one");
    // rows that do not continue the session are refused, and the session is left as it was
    let mut bad = Batch::new();
    bad.add_tokens(0, s.len() + 1, &b[..1], |_| true);
    let err = e.forward(&mut [&mut s], &bad.rows).unwrap_err().to_string();
    assert!(err.contains("expects position"), "{err}");
    let q = load(&synthetic("qwen35-tiny"), 2048, 512);
    let mut r = q.new_session(None).unwrap();
    let mut batch = Batch::new();
    batch.add_tokens(0, 0, &a, |_| false);
    q.forward(&mut [&mut r], &batch.rows).unwrap();
    assert!(r.truncate(5).unwrap_err().to_string().contains("recurrent"));
    r.truncate(0).unwrap();
    assert!(r.is_empty());
}

/// Decodes `text` one token at a time through a session and compares every row's distribution
/// with the one-pass prefill of the same tokens: mean KLD (nats) and the worst row.
fn decode_vs_prefill(name: &str) -> (f64, f64) {
    let Some(m) = lse_testdata::model(name) else { return (0.0, 0.0) };
    let e = load(&m, 2048, 512);
    let text = std::fs::read_to_string(lse_testdata::data("wiki.test.raw")).unwrap();
    let toks: Vec<u32> = e.tokenizer().tokenize(&text[..6000], true, false).into_iter().take(512).collect();
    assert_eq!(toks.len(), 512);
    let positions: Vec<usize> = (0..toks.len()).collect();
    let pre = e.prefill(&toks, &positions).unwrap();
    let mut s = e.new_session(Some(512)).unwrap();
    let mut dec = lse_engine::HiddenRows { n_rows: 0, n_embd: e.n_embd(), data: Vec::new() };
    for &t in &toks {
        let mut b = Batch::new();
        b.add_tokens(0, s.len(), &[t], |_| true);
        let h = e.forward(&mut [&mut s], &b.rows).unwrap();
        dec.data.extend_from_slice(&h.data);
        dec.n_rows += 1;
    }
    let v = e.n_vocab();
    let (mut sum, mut worst) = (0.0f64, 0.0f64);
    for r0 in (0..512).step_by(64) {
        let block = |h: &lse_engine::HiddenRows| lse_engine::HiddenRows {
            n_rows: 64,
            n_embd: h.n_embd,
            data: h.data[r0 * h.n_embd..(r0 + 64) * h.n_embd].to_vec(),
        };
        let (p, q) = (e.head_logits(&block(&pre)).unwrap(), e.head_logits(&block(&dec)).unwrap());
        for (pr, qr) in p.chunks_exact(v).zip(q.chunks_exact(v)) {
            let (lp, lq) = (log_softmax(pr), log_softmax(qr));
            let kld: f64 = lp.iter().zip(&lq).map(|(a, b)| a.exp() * (a - b)).sum();
            sum += kld;
            worst = worst.max(kld);
        }
    }
    let mean = sum / 512.0;
    eprintln!("{name}: decode vs prefill over 512 tokens: mean KLD {mean:.3e}, max {worst:.3e}");
    (mean, worst)
}

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let m = row.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = row.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln() + m;
    row.iter().map(|&x| x as f64 - lse).collect()
}

// The floor (docs/FIDELITY.md) is llama.cpp's own flash vs dense gap, mean KLD 0.0037 (SmolLM2)
// and 0.0059 (Gemma-3). Batch invariance makes a decoded row the same arithmetic as its prefill
// row, so the engine holds itself to zero.
#[test]
fn smollm2_decode_matches_prefill() {
    assert_eq!(decode_vs_prefill("smollm2"), (0.0, 0.0));
}

#[test]
fn gemma3_decode_matches_prefill() {
    assert_eq!(decode_vs_prefill("gemma3"), (0.0, 0.0));
}

#[test]
fn qwen25coder_decode_matches_prefill() {
    assert_eq!(decode_vs_prefill("qwen25coder"), (0.0, 0.0));
}

/// A generated token's log-prob and its alternatives' are, bit for bit, what scoring's LM-head
/// reduction (`head_reduce`, the vocabulary in slices) gives the same position's row: SmolLM2's
/// 49152 entries are two slices, whose sums a whole-row reduction would add in another order.
#[test]
fn generated_logprobs_are_scorings() {
    let Some(m) = lse_testdata::model("smollm2") else { return };
    let e = load(&m, 512, 512);
    let prompt = ids(11, 40, e.n_vocab());
    let req = GenerateRequest { sampling: SamplingParams { temperature: 0.0, ..Default::default() }, ..greedy(&prompt, 12) };
    let g = run_to_end(&e, e.start_sequence(&req).unwrap());
    let toks: Vec<u32> = prompt.iter().copied().chain(g.ids()).collect();
    let positions: Vec<usize> = (0..toks.len() - 1).collect();
    let hidden = e.prefill(&toks[..toks.len() - 1], &positions).unwrap();
    let n = g.steps.len();
    let rows = lse_engine::HiddenRows { n_rows: n, n_embd: hidden.n_embd, data: hidden.data[(prompt.len() - 1) * hidden.n_embd..].to_vec() };
    let picks: Vec<[u32; 1]> = g.steps.iter().map(|t| [t.id]).collect();
    let requests: Vec<lse_engine::RowRequest> = picks.iter().map(|p| lse_engine::RowRequest { ids: p, top_k: 3 }).collect();
    let reds = e.head_reduce(&rows, &requests).unwrap();
    for (i, (step, red)) in g.steps.iter().zip(&reds).enumerate() {
        let lp = |l: f32| l as f64 - red.max as f64 - red.sum_exp.ln();
        assert_eq!(step.logprob.to_bits(), lp(red.picked[0]).to_bits(), "step {i}: log-prob of token {}", step.id);
        let top: Vec<(u32, u64)> = red.top.iter().map(|&(t, l)| (t, lp(l).to_bits())).collect();
        let got: Vec<(u32, u64)> = step.top.iter().map(|&(t, l)| (t, l.to_bits())).collect();
        assert_eq!(got, top, "step {i}: alternatives");
    }
}

/// A greedy request for `prompt` (ids), `n` tokens.
fn greedy(prompt: &[u32], n: i64) -> GenerateRequest {
    GenerateRequest {
        prompt: Prompt::Tokens(prompt.to_vec()),
        max_tokens: n,
        ignore_eos: true,
        top_logprobs: 3,
        sampling: SamplingParams { temperature: 0.0, repeat_penalty: 1.3, ..Default::default() },
        ..Default::default()
    }
}

fn run_to_end(e: &Engine, mut s: Sequence) -> Sequence {
    while !s.is_done() {
        e.step(&mut [&mut s], 7).unwrap();
    }
    s
}

/// A step's token, log-prob bits and its alternatives' (id, log-prob bits).
type StepBits = (u32, u64, Vec<(u32, u64)>);

/// Every step of a finished sequence, bit for bit.
fn outcome(s: &Sequence) -> Vec<StepBits> {
    s.steps.iter().map(|t| (t.id, t.logprob.to_bits(), t.top.iter().map(|&(i, l)| (i, l.to_bits())).collect())).collect()
}

/// Starts `second` in the session `first` left and checks it against a new session: the same
/// tokens and log-probs bit for bit, `want_cached` prompt tokens kept.
fn check_reuse(e: &Engine, first: &GenerateRequest, second: &GenerateRequest, want_cached: usize) {
    let a = run_to_end(e, e.start_sequence(first).unwrap());
    let reused = e.start_sequence_in(second, Some(a.into_session())).unwrap();
    assert_eq!(reused.cached_tokens(), want_cached, "prompt tokens kept");
    assert_eq!(reused.prompt_left(), e.prompt_ids(second).unwrap().len() - want_cached);
    let reused = run_to_end(e, reused);
    let fresh = run_to_end(e, e.start_sequence(second).unwrap());
    assert_eq!(fresh.cached_tokens(), 0);
    assert!(outcome(&reused) == outcome(&fresh), "a generation in a kept session differs from one in a new session");
}

/// A random prompt of `n` tokens (seed `seed`), its greedy generation of `gen` tokens, and the
/// prompt continued by that generation and `more` random tokens.
fn continued(e: &Engine, seed: u64, n: usize, gen: i64, more: usize) -> (Vec<u32>, Sequence, Vec<u32>) {
    let p = ids(seed, n, e.n_vocab());
    let a = run_to_end(e, e.start_sequence(&greedy(&p, gen)).unwrap());
    let mut next: Vec<u32> = p.iter().copied().chain(a.ids()).collect();
    next.extend(ids(seed + 1, more, e.n_vocab()));
    (p, a, next)
}

#[test]
fn a_generation_in_a_kept_session_equals_one_in_a_new_session() {
    for name in ["llama-tiny", "gemma3-tiny", "qwen35-tiny"] {
        let e = load(&synthetic(name), 2048, 512);
        let v = e.n_vocab();
        // the session holds the prompt and the 5 tokens fed after it (the 6th was not fed)
        let (p, _, next) = continued(&e, 7, 40, 6, 9);
        check_reuse(&e, &greedy(&p, 6), &greedy(&next, 8), 45);
        // the same prompt again: all but its last token are kept
        check_reuse(&e, &greedy(&p, 6), &greedy(&p, 8), if name == "qwen35-tiny" { 0 } else { 39 });
        // a prompt that leaves the kept tokens after 25 of them
        let mut other = p[..25].to_vec();
        other.extend(ids(9, 12, v));
        check_reuse(&e, &greedy(&p, 6), &greedy(&other, 8), if name == "qwen35-tiny" { 0 } else { 25 });
        // nothing in common
        check_reuse(&e, &greedy(&p, 6), &greedy(&ids(10, 30, v), 8), 0);
    }
}

#[test]
fn reusable_prefix_keeps_the_last_prompt_token_to_run() {
    let e = load(&synthetic("llama-tiny"), 2048, 512);
    let mut s = e.new_session(None).unwrap();
    let t = ids(11, 10, e.n_vocab());
    let mut b = Batch::new();
    b.add_tokens(0, 0, &t, |_| false);
    e.forward(&mut [&mut s], &b.rows).unwrap();
    assert_eq!(s.reusable_prefix(&t), 9);
    assert_eq!(s.reusable_prefix(&t[..4]), 3);
    assert_eq!(s.reusable_prefix(&[t[0]]), 0);
    assert_eq!(s.reusable_prefix(&[]), 0);
    let mut longer = t.clone();
    longer.push(3);
    assert_eq!(s.reusable_prefix(&longer), 10);
    longer[6] ^= 1;
    assert_eq!(s.reusable_prefix(&longer), 6);
}

#[test]
fn a_forked_session_is_an_independent_copy() {
    for name in ["llama-tiny", "qwen35-tiny"] {
        let e = load(&synthetic(name), 2048, 512);
        let (_, a, next) = continued(&e, 21, 50, 5, 7);
        let original = a.into_session();
        let fork = original.fork();
        assert_eq!(fork.tokens(), original.tokens());
        let fresh = outcome(&run_to_end(&e, e.start_sequence(&greedy(&next, 6)).unwrap()));
        // the fork runs first and must leave the original as it was
        let in_fork = run_to_end(&e, e.start_sequence_in(&greedy(&next, 6), Some(fork)).unwrap());
        assert_eq!(in_fork.cached_tokens(), 54);
        assert!(outcome(&in_fork) == fresh, "{name}: a generation in a fork differs");
        let in_original = run_to_end(&e, e.start_sequence_in(&greedy(&next, 6), Some(original)).unwrap());
        assert!(outcome(&in_original) == fresh, "{name}: the original changed when its fork ran");
    }
}

/// A step's prompt budget: a quarter to the oldest sequence with prompt rows left, the rest to the
/// prompts with the fewest rows left first (ties in their order). Short prompts started after a
/// long one get their first tokens at once while the long one keeps moving; every sequence
/// generates what it does alone.
#[test]
fn a_step_feeds_the_shortest_prompts_first() {
    let e = load(&synthetic("llama-tiny"), 2048, 512);
    let v = e.n_vocab();
    let (long, short, other) = (ids(31, 90, v), ids(32, 12, v), ids(33, 12, v));
    let mut seqs: Vec<Sequence> = [&long, &short, &other].iter().map(|p| e.start_sequence(&greedy(p, 4)).unwrap()).collect();
    let left = |seqs: &[Sequence]| seqs.iter().map(|s| s.prompt_left()).collect::<Vec<_>>();
    let stats = e.step(&mut seqs.iter_mut().collect::<Vec<_>>(), 20).unwrap();
    assert_eq!((stats.prompt_rows, stats.decode_rows), (20, 0));
    // the long prompt's 5 (a quarter of 20), then 12 for the first short one, 3 for the tie after it
    assert_eq!(left(&seqs), [85, 0, 9]);
    assert_eq!(seqs[1].steps.len(), 1, "the short prompt's first token comes out of the first step");
    let stats = e.step(&mut seqs.iter_mut().collect::<Vec<_>>(), 20).unwrap();
    // one decode row; the long prompt's 5, the tie's last 9, then 6 more of the long prompt's
    assert_eq!((stats.prompt_rows, stats.decode_rows), (20, 1));
    assert_eq!(left(&seqs), [74, 0, 0]);
    // with the long prompt no longer the oldest, it still goes last
    let mut later = vec![e.start_sequence(&greedy(&ids(34, 30, v), 4)).unwrap(), seqs.remove(0)];
    e.step(&mut later.iter_mut().collect::<Vec<_>>(), 20).unwrap();
    assert_eq!(left(&later), [10, 74], "the oldest prompt's quarter, then the shortest first");
    while later.iter().any(|s| !s.is_done()) || seqs.iter().any(|s| !s.is_done()) {
        let mut all: Vec<&mut Sequence> = later.iter_mut().chain(seqs.iter_mut()).collect();
        e.step(&mut all, 20).unwrap();
    }
    let prompts = [&long, &ids(34, 30, v), &short, &other];
    let done: Vec<&Sequence> = [&later[1], &later[0], &seqs[0], &seqs[1]].into_iter().collect();
    for (s, p) in done.into_iter().zip(prompts) {
        let solo = run_to_end(&e, e.start_sequence(&greedy(p, 4)).unwrap());
        assert!(outcome(s) == outcome(&solo), "a sequence's tokens depend on the others' prompts");
    }
}
