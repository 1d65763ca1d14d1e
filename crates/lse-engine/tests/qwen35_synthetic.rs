//! qwen35-tiny (3 gated-delta-net layers + 1 gated full-attention layer) against llama.cpp's
//! top-32 log-probs and chunk perplexities (`data/golden/synthetic`, ctx 128, 8 chunks,
//! rows 64..126 scored), and the recurrent state carried across passes and ubatches.

mod common;

use common::*;
use lse_engine::{Dialect, Engine, EngineOptions, KvDtype};

const CTX: usize = 128;
const NAME: &str = "qwen35-tiny";

fn opts(flash: bool, kv: KvDtype, batch: usize, ubatch: usize, threads: usize) -> EngineOptions {
    EngineOptions {
        threads,
        batch_size: batch,
        ubatch_size: ubatch,
        kv_dtype: kv,
        kv_len: Some(CTX),
        flash_attention: flash,
        dialect: Dialect::Simd,
        cpu_fallback_allowed: true,
        simd: None,
        huge_pages: false,
    }
}

fn run(o: EngineOptions) -> Scores {
    let dir = lse_testdata::golden("synthetic");
    let engine = Engine::load(&dir.join(format!("{NAME}.gguf")), o).unwrap_or_else(|e| panic!("{NAME}: {e}"));
    assert_eq!(engine.architecture(), "qwen35");
    let gold = read_json(&dir.join(format!("{NAME}.top32.json")));
    score_windows(&engine, &synthetic_windows(&gold), CTX / 2)
}

/// Asserts the acceptance bounds (mean KLD <= 1e-3, same top-1 >= 98%, every running chunk
/// PPL within 0.5% of llama.cpp's) and prints the measured numbers.
fn check(tag: &str, s: &Scores) {
    let (ppl, ppl_gold, worst) = synthetic_ppl(NAME, CTX, &format!("{NAME} {tag}"), s);
    assert_eq!(ppl.len(), ppl_gold.len(), "{tag}: chunk count");
    assert!(s.mean_kld() <= 1e-3, "{tag}: mean KLD {:.3e} > 1e-3", s.mean_kld());
    assert!(s.top1() >= 0.98, "{tag}: same top-1 {:.2}% < 98%", 100.0 * s.top1());
    assert!(worst <= 0.005, "{tag}: chunk PPL off by {:.3}%: {ppl:?} vs {ppl_gold:?}", 100.0 * worst);
}

#[test]
fn qwen35_tiny_matches_llamacpp() {
    for flash in [true, false] {
        for kv in [KvDtype::F16, KvDtype::F32] {
            let s = run(opts(flash, kv, CTX, CTX, 2));
            check(&format!("flash={flash} kv={}", kv.name()), &s);
        }
    }
}

/// The conv and delta-rule states carry across passes (batch) and launches (ubatch): plans that
/// split each window differently give the same log-probs up to rounding.
#[test]
fn qwen35_tiny_state_carries_across_passes() {
    let base = run(opts(true, KvDtype::F16, CTX, CTX, 2));
    // (batch, ubatch, threads): 16-token launches in 64-token passes; odd launches that leave
    // 1-token tails (64 = 9·7 + 1), shorter than the conv history; and token-at-a-time decoding
    // (on one thread: waking pool workers for every 1-token launch only costs time here).
    for (batch, ubatch, threads) in [(64, 16, 2), (64, 7, 2), (CTX, 1, 1)] {
        let s = run(opts(true, KvDtype::F16, batch, ubatch, threads));
        let d = max_logp_diff(&base, &s);
        let same = base.argmax.iter().zip(&s.argmax).filter(|(a, b)| a == b).count();
        eprintln!("{NAME} batch {batch} ubatch {ubatch}: max |dlogp| vs one pass {d:.2e}, same argmax {same}/{}", s.argmax.len());
        assert!(d < 2e-3, "batch {batch} ubatch {ubatch}: log-probs moved by {d:.2e}");
        assert!(same * 1000 >= s.argmax.len() * 998, "batch {batch} ubatch {ubatch}: argmax changed on {} rows", s.argmax.len() - same);
        check(&format!("batch={batch} ubatch={ubatch}"), &s);
    }
}

/// Without `attention.recurrent_layers` the layer kinds come from llama.cpp's rule
/// (`(il + 1) % full_attention_interval != 0`), which gives the same stack here.
#[test]
fn qwen35_tiny_recurrent_layers_from_interval() {
    let path = rewritten(&lse_testdata::golden(&format!("synthetic/{NAME}.gguf")), "qwen35-interval", &["qwen35.attention.recurrent_layers"], &[]);
    let o = opts(true, KvDtype::F16, CTX, CTX, 2);
    let engine = Engine::load(&path, o.clone()).unwrap_or_else(|e| panic!("{e}"));
    let gold = read_json(&lse_testdata::golden(&format!("synthetic/{NAME}.top32.json")));
    let s = score_windows(&engine, &synthetic_windows(&gold)[..2], CTX / 2);
    drop(engine);
    let _ = std::fs::remove_file(&path);
    let base = {
        let engine = Engine::load(&lse_testdata::golden(&format!("synthetic/{NAME}.gguf")), o).unwrap();
        score_windows(&engine, &synthetic_windows(&gold)[..2], CTX / 2)
    };
    assert_eq!(max_logp_diff(&base, &s), 0.0);

    // an interval that makes layer 3 recurrent asks for GDN tensors the file does not have
    let path = rewritten(&lse_testdata::golden(&format!("synthetic/{NAME}.gguf")), "qwen35-interval5", &["qwen35.attention.recurrent_layers"], &[("qwen35.full_attention_interval", lse_gguf::Value::U32(5))]);
    let err = Engine::load(&path, opts(true, KvDtype::F16, CTX, CTX, 1)).err().expect("layer 3 has no GDN tensors");
    let _ = std::fs::remove_file(&path);
    assert!(err.to_string().contains("blk.3.attn_qkv.weight"), "{err}");
}

/// Missing or inconsistent GDN geometry is a load error naming the key, never a panic.
#[test]
fn qwen35_bad_ssm_metadata_is_an_error() {
    let path = rewritten(&lse_testdata::golden(&format!("synthetic/{NAME}.gguf")), "qwen35-nokernel", &["qwen35.ssm.conv_kernel"], &[]);
    let err = Engine::load(&path, opts(true, KvDtype::F16, CTX, CTX, 1)).err().expect("missing ssm.conv_kernel");
    let _ = std::fs::remove_file(&path);
    assert!(err.to_string().contains("ssm.conv_kernel"), "{err}");

    let path = rewritten(&lse_testdata::golden(&format!("synthetic/{NAME}.gguf")), "qwen35-badgroups", &[], &[("qwen35.ssm.group_count", lse_gguf::Value::U32(3))]);
    let err = Engine::load(&path, opts(true, KvDtype::F16, CTX, CTX, 1)).err().expect("4 value heads over 3 key heads");
    let _ = std::fs::remove_file(&path);
    assert!(err.to_string().contains("key heads"), "{err}");
}
