//! The tiny mixture-of-experts models (data/golden/synthetic-moe: qwen3moe, qwen35moe, gpt-oss;
//! f32 and Q8_0 / MXFP4) against llama.cpp's log-probs and chunk perplexities (ctx 128, 8 chunks, rows 64..126),
//! flash and dense, KV f16 and f32; and batch invariance of the expert routing.

mod common;

use common::*;
use lse_engine::{Engine, EngineOptions, KvDtype};
use serde_json::Value;
use std::path::PathBuf;

const CTX: usize = TINY_CTX;
const FOLDER: &str = "synthetic-moe";

fn opts(flash: bool, kv: KvDtype, batch: usize, ubatch: usize) -> EngineOptions {
    tiny_opts(flash, kv, batch, ubatch)
}

fn golden(name: &str, kv: KvDtype) -> Value {
    tiny_golden(FOLDER, name, kv)
}

fn model(name: &str) -> PathBuf {
    lse_testdata::golden(&format!("{FOLDER}/{name}.gguf"))
}

fn load(name: &str, o: EngineOptions) -> Engine {
    Engine::load(&model(name), o).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn check_model(name: &str, arch: &str, nll_tol: f64, kld_tol: f64, ppl_tol: f64, top1_min: f64) {
    check_tiny_model(FOLDER, name, arch, nll_tol, kld_tol, ppl_tol, top1_min)
}

#[test]
fn qwen3moe_tiny_matches_llamacpp() {
    check_model("qwen3moe-tiny", "qwen3moe", 1e-3, 1e-4, 0.001, 0.99);
}

#[test]
fn qwen35moe_tiny_matches_llamacpp() {
    check_model("qwen35moe-tiny", "qwen35moe", 1e-3, 1e-4, 0.001, 0.99);
}

// Q8_0: every matmul input is rounded to 8 bits, so last-bit differences flip roundings (ARCH.md);
// llama.cpp's own fa-f16 and dense-f32 runs of these files differ by up to 0.52 NLL per row.
#[test]
fn qwen3moe_tiny_q8_0_matches_llamacpp() {
    check_model("qwen3moe-tiny-q8_0", "qwen3moe", 0.15, 1e-4, 0.005, 0.98);
}

#[test]
fn qwen35moe_tiny_q8_0_matches_llamacpp() {
    check_model("qwen35moe-tiny-q8_0", "qwen35moe", 0.15, 1e-4, 0.005, 0.98);
}

#[test]
fn gpt_oss_tiny_matches_llamacpp() {
    check_model("gpt-oss-tiny", "gpt-oss", 1e-3, 1e-4, 0.001, 0.99);
}

// MXFP4 experts, the other matrices Q8_0: 8-bit activations again, and the gate weights (x3, to reach
// the clamp) make it more chaotic: llama.cpp's own fa-f16 and dense-f32 runs differ by up to 1.6 NLL.
#[test]
fn gpt_oss_tiny_mxfp4_matches_llamacpp() {
    check_model("gpt-oss-tiny-mxfp4", "gpt-oss", 0.5, 1e-4, 0.005, 0.98);
}

/// Each window's log-probs are bit-identical whether it runs alone, beside the other windows in
/// one pass (other rows pick other experts), or split into odd ubatches.
#[test]
fn moe_routing_is_batch_invariant() {
    for name in ["qwen3moe-tiny", "qwen35moe-tiny-q8_0", "gpt-oss-tiny-mxfp4"] {
        let gold = golden(name, KvDtype::F16);
        let windows = synthetic_windows(&gold);
        let alone = score_windows(&load(name, opts(true, KvDtype::F16, CTX, CTX)), &windows, CTX / 2);
        let engine = load(name, opts(true, KvDtype::F16, 8 * CTX, 8 * CTX));
        let positions: Vec<usize> = (CTX / 2..CTX - 1).collect();
        let batch: Vec<(&[u32], &[usize])> = windows.iter().map(|w| (w.input.as_slice(), positions.as_slice())).collect();
        let hidden = engine.prefill_windows(&batch).expect("prefill_windows");
        for (wi, (h, w)) in hidden.iter().zip(&windows).enumerate() {
            let alone_h = engine.prefill(&w.input, &positions).expect("prefill");
            assert!(h.data == alone_h.data, "{name}: window {wi} hidden rows differ beside other windows");
        }
        for (batch, ubatch) in [(64, 16), (37, 7)] {
            let s = score_windows(&load(name, opts(true, KvDtype::F16, batch, ubatch)), &windows, CTX / 2);
            assert_eq!(max_logp_diff(&alone, &s), 0.0, "{name}: batch {batch} ubatch {ubatch}");
        }
    }
}

/// Missing or inconsistent expert metadata is one load error naming the key or tensor.
#[test]
fn bad_expert_metadata_is_an_error() {
    use lse_gguf::Value;
    for (name, tag, drop, set, want) in [
        ("qwen3moe-tiny", "nocount", vec!["qwen3moe.expert_count"], vec![], "qwen3moe.expert_count"),
        ("qwen3moe-tiny", "used9", vec![], vec![("qwen3moe.expert_used_count", Value::U32(9))], "9 experts used of 8"),
        ("qwen3moe-tiny", "count7", vec![], vec![("qwen3moe.expert_count", Value::U32(7))], "blk.0.ffn_gate_exps.weight' has shape [64, 64, 8]"),
        ("gpt-oss-tiny", "noswa", vec!["gpt-oss.attention.sliding_window"], vec![], "sliding_window"),
        ("gpt-oss-tiny", "logmul", vec![], vec![("gpt-oss.rope.scaling.yarn_log_multiplier", Value::F32(0.1))], "yarn_log_multiplier"),
    ] {
        let path = rewritten(&model(name), &format!("moe-{tag}"), &drop, &set);
        let err = Engine::load(&path, opts(true, KvDtype::F16, CTX, CTX)).err().unwrap_or_else(|| panic!("{tag}: loaded"));
        let _ = std::fs::remove_file(&path);
        let msg = err.to_string();
        assert!(msg.contains(want) && !msg.contains('\n'), "{tag}: {msg}");
    }
}

/// Session 0's logits (as bits) after its prompt and after each decode token, run through
/// `Engine::forward` alone (`crowd` false) or with 3 other sessions in every pass (their prompt
/// slices and decode rows choose other experts), session 0 at a different place each time.
fn session_logits(e: &Engine, prompt: &[u32], decode: &[u32], crowd: bool) -> Vec<Vec<u32>> {
    use lse_engine::{Batch, Session};
    let v = e.n_vocab();
    let n = if crowd { 4 } else { 1 };
    let mut sessions: Vec<Session> = (0..n).map(|_| e.new_session(None).unwrap()).collect();
    let mut out = Vec::new();
    for step in 0..=decode.len() {
        let mut b = Batch::new();
        for k in 1..n {
            let toks: Vec<u32> = (0..if step == 0 { 9 + 5 * k } else { 1 + k % 2 }).map(|i| ((step * 31 + k * 7 + i * 13) % (v - 10) + 5) as u32).collect();
            if k == step % (n - 1) + 1 {
                b.add_tokens(0, sessions[0].len(), if step == 0 { prompt } else { &decode[step - 1..step] }, |_| true);
            }
            b.add_tokens(k, sessions[k].len(), &toks, |i| i + 1 == toks.len());
        }
        if !crowd {
            b.add_tokens(0, sessions[0].len(), if step == 0 { prompt } else { &decode[step - 1..step] }, |_| true);
        }
        let before = b.rows.iter().take_while(|r| r.seq != 0).filter(|r| r.output).count();
        let mine = b.rows.iter().filter(|r| r.seq == 0).count();
        let mut refs: Vec<&mut Session> = sessions.iter_mut().collect();
        let logits = e.head_logits(&e.forward(&mut refs, &b.rows).unwrap()).unwrap();
        out.push(logits[before * v..(before + mine) * v].iter().map(|x| x.to_bits()).collect());
    }
    out
}

/// Prefill and decode rows of one session give bit-identical logits whether the session runs
/// alone or shares every pass with other sessions (the batch invariance the engine promises).
#[test]
fn moe_sessions_alone_equal_crowded() {
    for name in ["qwen35moe-tiny", "gpt-oss-tiny-mxfp4", "qwen3moe-tiny-q8_0"] {
        let e = load(name, opts(true, KvDtype::F16, CTX, 16));
        let prompt: Vec<u32> = (0..23).map(|i| (i * 37 % 4000 + 5) as u32).collect();
        let decode: Vec<u32> = (0..12).map(|i| (i * 101 % 4000 + 5) as u32).collect();
        assert!(session_logits(&e, &prompt, &decode, false) == session_logits(&e, &prompt, &decode, true), "{name}: logits depend on the other sessions");
    }
}
