//! The tiny dense models of issue 13 (data/golden/synthetic-dense: smollm3, mistral3, gemma2, phi3, granite;
//! f32 and Q8_0)
//! against llama.cpp's log-probs and chunk perplexities (ctx 128, 8 chunks, rows 64..126), flash and
//! dense, KV f16 and f32; and one clear load error per unsupported or inconsistent key.

mod common;

use common::*;
use lse_engine::{Engine, EngineOptions, KvDtype};
use serde_json::Value;
use std::path::PathBuf;

const CTX: usize = TINY_CTX;
const FOLDER: &str = "synthetic-dense";

fn model(name: &str) -> PathBuf {
    lse_testdata::golden(&format!("{FOLDER}/{name}.gguf"))
}

fn opts(flash: bool, kv: KvDtype) -> EngineOptions {
    tiny_opts(flash, kv, CTX, CTX)
}

fn golden(name: &str, kv: KvDtype) -> Value {
    tiny_golden(FOLDER, name, kv)
}

fn check_model(name: &str, arch: &str, nll_tol: f64, kld_tol: f64, ppl_tol: f64, top1_min: f64) {
    check_tiny_model(FOLDER, name, arch, nll_tol, kld_tol, ppl_tol, top1_min)
}

#[test]
fn smollm3_tiny_matches_llamacpp() {
    check_model("smollm3-tiny", "smollm3", 1e-3, 1e-4, 0.001, 0.99);
}

#[test]
fn mistral3_tiny_matches_llamacpp() {
    check_model("mistral3-tiny", "mistral3", 1e-3, 1e-4, 0.001, 0.99);
}

// Q8_0: every matmul input is rounded to 8 bits, so last-bit differences flip roundings and
// llama.cpp's own fa-f16 and dense-f32 runs differ (ARCH.md); the bounds are those of the Q8_0
// MoE models (tests/moe_synthetic.rs).
#[test]
fn smollm3_tiny_q8_0_matches_llamacpp() {
    check_model("smollm3-tiny-q8_0", "smollm3", 0.15, 1e-4, 0.005, 0.98);
}

#[test]
fn mistral3_tiny_q8_0_matches_llamacpp() {
    check_model("mistral3-tiny-q8_0", "mistral3", 0.15, 1e-4, 0.005, 0.98);
}

#[test]
fn gemma2_tiny_matches_llamacpp() {
    check_model("gemma2-tiny", "gemma2", 1e-3, 1e-4, 0.001, 0.99);
}

#[test]
fn gemma2_tiny_q8_0_matches_llamacpp() {
    check_model("gemma2-tiny-q8_0", "gemma2", 0.15, 1e-4, 0.005, 0.98);
}

#[test]
fn phi3_tiny_matches_llamacpp() {
    check_model("phi3-tiny", "phi3", 1e-3, 1e-4, 0.001, 0.99);
}

#[test]
fn phi3_tiny_q8_0_matches_llamacpp() {
    check_model("phi3-tiny-q8_0", "phi3", 0.15, 1e-4, 0.005, 0.98);
}

/// Unsupported or inconsistent metadata is one load error naming the key; a phi3 session longer
/// than the short rope factors serve is refused naming `rope_factors_long`.
#[test]
fn bad_dense_metadata_is_an_error() {
    use lse_gguf::Value;
    for (name, tag, drop, set, want) in [
        ("mistral3-tiny", "experts", vec![], vec![("mistral3.expert_count", Value::U32(4))], "mistral3.expert_count"),
        ("granite-tiny", "nologit", vec!["granite.logit_scale"], vec![], "granite.logit_scale"),
        ("granite-tiny", "experts", vec![], vec![("granite.expert_count", Value::U32(4))], "granite.expert_count"),
        ("gemma2-tiny", "finalcap", vec![], vec![("gemma2.final_logit_softcapping", Value::F32(-1.0))], "gemma2.final_logit_softcapping"),
        ("gemma2-tiny", "attncap", vec![], vec![("gemma2.attn_logit_softcapping", Value::F32(-1.0))], "gemma2.attn_logit_softcapping"),
        (
            "smollm3-tiny",
            "logmul",
            vec![],
            vec![("smollm3.rope.scaling.type", Value::String("yarn".into())), ("smollm3.rope.scaling.yarn_log_multiplier", Value::F32(0.1))],
            "yarn_log_multiplier",
        ),
    ] {
        let path = rewritten(&model(name), &format!("dense-{tag}"), &drop, &set);
        let err = Engine::load(&path, opts(true, KvDtype::F16)).err().unwrap_or_else(|| panic!("{tag}: loaded"));
        let _ = std::fs::remove_file(&path);
        let msg = err.to_string();
        assert!(msg.contains(want) && !msg.contains('\n'), "{tag}: {msg}");
    }
    let e = Engine::load(&model("phi3-tiny"), EngineOptions { kv_len: Some(8192), ..opts(true, KvDtype::F16) }).expect("load phi3");
    assert!(e.new_session(Some(4096)).is_ok());
    let msg = e.new_session(None).err().expect("8192-token phi3 session").to_string();
    assert!(msg.contains("rope_factors_long") && msg.contains("4096"), "{msg}");
}

#[test]
fn granite_tiny_matches_llamacpp() {
    check_model("granite-tiny", "granite", 1e-3, 1e-4, 0.001, 0.99);
}

#[test]
fn granite_tiny_q8_0_matches_llamacpp() {
    check_model("granite-tiny-q8_0", "granite", 0.15, 1e-4, 0.005, 0.98);
}

/// Each model's log-probs are bit-identical whatever the batch / ubatch split (the soft-capped
/// attention, the per-position temperature and the fused-tensor row ranges included).
#[test]
fn dense_archs_are_batch_invariant() {
    for name in ["smollm3-tiny", "mistral3-tiny", "gemma2-tiny", "phi3-tiny-q8_0", "granite-tiny"] {
        let windows = synthetic_windows(&golden(name, KvDtype::F16));
        let whole = score_windows(&Engine::load(&model(name), opts(true, KvDtype::F16)).unwrap(), &windows, CTX / 2);
        for (batch, ubatch) in [(64, 16), (37, 7)] {
            let o = EngineOptions { batch_size: batch, ubatch_size: ubatch, ..opts(true, KvDtype::F16) };
            let s = score_windows(&Engine::load(&model(name), o).unwrap(), &windows, CTX / 2);
            assert_eq!(max_logp_diff(&whole, &s), 0.0, "{name}: batch {batch} ubatch {ubatch}");
        }
    }
}

/// llama.cpp soft-caps the final logits of gemma2 / gemma3 only: a `final_logit_softcapping` key
/// on a granite file changes nothing.
#[test]
fn final_softcap_key_is_ignored_outside_gemma() {
    let windows = synthetic_windows(&golden("granite-tiny", KvDtype::F16));
    let path = rewritten(&model("granite-tiny"), "dense-finalcap", &[], &[("granite.final_logit_softcapping", lse_gguf::Value::F32(15.0))]);
    let with_key = score_windows(&Engine::load(&path, opts(true, KvDtype::F16)).unwrap(), &windows, CTX / 2);
    let _ = std::fs::remove_file(&path);
    let plain = score_windows(&Engine::load(&model("granite-tiny"), opts(true, KvDtype::F16)).unwrap(), &windows, CTX / 2);
    assert_eq!(max_logp_diff(&plain, &with_key), 0.0);
}
