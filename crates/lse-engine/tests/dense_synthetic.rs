//! The tiny dense models of issue 13 (data/golden/synthetic-dense: smollm3, mistral3, gemma2, phi3, granite;
//! f32 and Q8_0)
//! against llama.cpp's log-probs and chunk perplexities (ctx 128, 8 chunks, rows 64..126), flash and
//! dense, KV f16 and f32; and one clear load error per unsupported or inconsistent key.

mod common;

use common::*;
use lse_engine::{Dialect, Engine, EngineOptions, KvDtype};
use serde_json::Value;
use std::path::PathBuf;

const CTX: usize = 128;

fn model(name: &str) -> PathBuf {
    lse_testdata::golden(&format!("synthetic-dense/{name}.gguf"))
}

fn opts(flash: bool, kv: KvDtype) -> EngineOptions {
    EngineOptions {
        threads: 2,
        batch_size: CTX,
        ubatch_size: CTX,
        kv_dtype: kv,
        kv_len: Some(CTX),
        flash_attention: flash,
        dialect: Dialect::Simd,
        cpu_fallback_allowed: true,
        ..EngineOptions::default()
    }
}

/// llama.cpp's run with the same KV dtype: `-fa on -ctk f16` or `-fa off -ctk f32`.
fn golden(name: &str, kv: KvDtype) -> Value {
    let tag = if kv == KvDtype::F16 { "fa-kvf16" } else { "dense-kvf32" };
    read_json(&lse_testdata::golden(&format!("synthetic-dense/{name}.{tag}.json")))
}

/// (max |ΔNLL| over rows whose target is above llama.cpp's clamp, worst relative chunk-PPL diff).
fn nll_and_ppl(gold: &Value, s: &Scores) -> (f64, f64) {
    let rows = gold["windows"].as_array().unwrap().iter().flat_map(|w| w["tokens"].as_array().unwrap().iter());
    let d: Vec<f64> =
        rows.zip(&s.nll).filter(|(g, _)| g.get("nll_clamped").is_none()).map(|(g, ours)| (g["nll"].as_f64().unwrap() - ours).abs()).collect();
    let dnll = d.iter().copied().fold(0.0, f64::max);
    let gold_ppl: Vec<f64> = gold["chunk_ppl"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let ppl = s.running_ppl(CTX - CTX / 2 - 1);
    assert_eq!(ppl.len(), gold_ppl.len());
    (dnll, ppl.iter().zip(&gold_ppl).map(|(a, b)| (a / b - 1.0).abs()).fold(0.0, f64::max))
}

/// Every configuration of one model against llama.cpp: max |ΔNLL| <= `nll_tol`, mean KLD <=
/// `kld_tol`, chunk PPL within `ppl_tol`, same top-1 on >= `top1_min` of the rows.
fn check_model(name: &str, arch: &str, nll_tol: f64, kld_tol: f64, ppl_tol: f64, top1_min: f64) {
    for kv in [KvDtype::F16, KvDtype::F32] {
        let gold = golden(name, kv);
        let windows = synthetic_windows(&gold);
        for flash in [true, false] {
            let engine = Engine::load(&model(name), opts(flash, kv)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(engine.architecture(), arch);
            let s = score_windows(&engine, &windows, CTX / 2);
            let (dnll, dppl) = nll_and_ppl(&gold, &s);
            let tag = format!("{name} flash={flash} kv={}", kv.name());
            eprintln!(
                "{tag}: max |dNLL| {dnll:.2e}, mean KLD {:.2e} (max {:.2e}), top-1 {:.2}%, worst chunk PPL diff {:.4}%",
                s.mean_kld(),
                s.max_kld(),
                100.0 * s.top1(),
                100.0 * dppl
            );
            assert!(dnll <= nll_tol, "{tag}: max |dNLL| {dnll:.3e} > {nll_tol:e}");
            assert!(s.mean_kld() <= kld_tol, "{tag}: mean KLD {:.3e} > {kld_tol:e}", s.mean_kld());
            assert!(dppl <= ppl_tol, "{tag}: chunk PPL off by {:.3}%", 100.0 * dppl);
            assert!(s.top1() >= top1_min, "{tag}: same top-1 {:.2}%", 100.0 * s.top1());
        }
    }
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

/// A copy of a tiny dense model with metadata keys dropped or replaced, written to a temp file.
fn rewritten(name: &str, tag: &str, drop: &[&str], set: &[(&str, lse_gguf::Value)]) -> PathBuf {
    let src = lse_gguf::GgufFile::open(&model(name)).expect("open model");
    let mut wr = lse_gguf::GgufWriter::new();
    wr.set_alignment(src.alignment() as u32);
    for (k, v) in src.metadata() {
        if !drop.contains(&k.as_str()) && !set.iter().any(|(s, _)| s == k) {
            wr.add_kv(k.clone(), v.clone());
        }
    }
    for (k, v) in set {
        wr.add_kv(*k, v.clone());
    }
    for t in src.tensors() {
        wr.add_tensor(t.name.clone(), &t.dims, t.ggml_type, src.tensor_data(t).to_vec());
    }
    let path = std::env::temp_dir().join(format!("lse-dense-{tag}-{}.gguf", std::process::id()));
    wr.write(&path).expect("write rewritten gguf");
    path
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
        let path = rewritten(name, tag, &drop, &set);
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
    let path = rewritten("granite-tiny", "finalcap", &[], &[("granite.final_logit_softcapping", lse_gguf::Value::F32(15.0))]);
    let with_key = score_windows(&Engine::load(&path, opts(true, KvDtype::F16)).unwrap(), &windows, CTX / 2);
    let _ = std::fs::remove_file(&path);
    let plain = score_windows(&Engine::load(&model("granite-tiny"), opts(true, KvDtype::F16)).unwrap(), &windows, CTX / 2);
    assert_eq!(max_logp_diff(&plain, &with_key), 0.0);
}
