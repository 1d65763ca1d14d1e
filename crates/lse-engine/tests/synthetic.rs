//! The tiny synthetic models against llama.cpp's top-32 and chunk perplexities
//! (`data/golden/synthetic`, ctx 128, 8 chunks, rows 64..126 scored).

mod common;

use common::*;
use lse_engine::{Dialect, Engine, EngineOptions, KvDtype};

const CTX: usize = 128;

fn opts(flash: bool, kv: KvDtype, plan: (usize, usize, usize), dialect: Dialect) -> EngineOptions {
    EngineOptions {
        threads: plan.2,
        batch_size: plan.0,
        ubatch_size: plan.1,
        kv_dtype: kv,
        kv_len: Some(CTX),
        flash_attention: flash,
        dialect,
        cpu_fallback_allowed: true,
        simd: None,
        huge_pages: false,
    }
}

fn run(name: &str, o: EngineOptions) -> Scores {
    let dir = lse_testdata::golden("synthetic");
    let engine = Engine::load(&dir.join(format!("{name}.gguf")), o).unwrap_or_else(|e| panic!("{name}: {e}"));
    let gold = read_json(&dir.join(format!("{name}.top32.json")));
    score_windows(&engine, &synthetic_windows(&gold), CTX / 2)
}

/// Checks one model in one configuration against the golden files; returns the scores.
fn check(name: &str, flash: bool, kv: KvDtype, quantized: bool) -> Scores {
    let s = run(name, opts(flash, kv, (CTX, CTX, 2), Dialect::Simd));
    let (kld_max, ppl_tol) = if quantized { (1e-2, 0.015) } else { (1e-3, 0.005) };
    // llama.cpp ran with an f16 KV cache. On the quantized models every matmul input is rounded to
    // Q8_0, which turns the tiny f32-vs-f16 KV difference into visible rounding flips: with an f32
    // cache about 2-3% of these near-tie rows (mean top-1 p ~0.1) change their argmax while the
    // KLD stays ~1e-4. The 98% bar applies wherever the cache matches llama.cpp's.
    let top1_min = if quantized && kv == KvDtype::F32 { 0.96 } else { 0.98 };
    let tag = format!("{name} flash={flash} kv={}", kv.name());
    let (ppl, ppl_gold, worst) = synthetic_ppl(name, CTX, &tag, &s);
    assert_eq!(ppl.len(), ppl_gold.len(), "{tag}: chunk count");
    assert!(s.mean_kld() <= kld_max, "{tag}: mean KLD {:.3e} > {kld_max:e}", s.mean_kld());
    assert!(s.top1() >= top1_min, "{tag}: same top-1 {:.2}% < {:.0}%", 100.0 * s.top1(), 100.0 * top1_min);
    assert!(worst <= ppl_tol, "{tag}: chunk PPL off by {:.3}% (> {:.1}%): {ppl:?} vs {ppl_gold:?}", 100.0 * worst, 100.0 * ppl_tol);
    s
}

fn check_all(name: &str, quantized: bool) {
    for flash in [true, false] {
        for kv in [KvDtype::F16, KvDtype::F32] {
            check(name, flash, kv, quantized);
        }
    }
}

#[test]
fn llama_tiny() {
    check_all("llama-tiny", false);
}

#[test]
fn qwen2_tiny() {
    check_all("qwen2-tiny", false);
}

#[test]
fn qwen3_tiny() {
    check_all("qwen3-tiny", false);
}

#[test]
fn gemma3_tiny() {
    check_all("gemma3-tiny", false);
}

#[test]
fn llama_tiny_q8_0() {
    check_all("llama-tiny-q8_0", true);
}

#[test]
fn llama_tiny_q4_0() {
    check_all("llama-tiny-q4_0", true);
}

/// Batch/ubatch/threads plans give the same results up to rounding, and still match llama.cpp.
#[test]
fn plans_agree() {
    for name in ["llama-tiny", "gemma3-tiny", "llama-tiny-q8_0"] {
        for flash in [true, false] {
            let base = run(name, opts(flash, KvDtype::F16, (128, 128, 1), Dialect::Simd));
            for plan in [(64, 32, 2), (128, 16, 2)] {
                let s = run(name, opts(flash, KvDtype::F16, plan, Dialect::Simd));
                let d = max_logp_diff(&base, &s);
                let same = base.argmax.iter().zip(&s.argmax).filter(|(a, b)| a == b).count();
                eprintln!("{name} plan {plan:?} flash={flash}: max |dlogp| vs (128,128,1) {d:.2e}, same argmax {same}/{}, mean KLD vs llama.cpp {:.3e}", s.argmax.len(), s.mean_kld());
                assert!(d < 1e-4, "{name} plan {plan:?} flash={flash}: log-probs moved by {d:.2e}");
                assert_eq!(same, s.argmax.len(), "{name} plan {plan:?}: argmax changed");
            }
        }
    }
}

/// The scalar kernels agree with the SIMD kernels on the argmax of >= 99.9% of all scored rows.
#[test]
fn scalar_matches_simd() {
    let (mut same, mut total) = (0, 0);
    for name in ["llama-tiny", "qwen2-tiny", "qwen3-tiny", "gemma3-tiny", "llama-tiny-q8_0", "llama-tiny-q4_0"] {
        let a = run(name, opts(true, KvDtype::F16, (128, 128, 2), Dialect::Simd));
        let b = run(name, opts(true, KvDtype::F16, (128, 128, 2), Dialect::Scalar));
        let n_same = a.argmax.iter().zip(&b.argmax).filter(|(x, y)| x == y).count();
        eprintln!("{name}: scalar vs simd same argmax {n_same}/{}, max |dlogp| {:.2e}", a.argmax.len(), max_logp_diff(&a, &b));
        same += n_same;
        total += a.argmax.len();
    }
    let frac = same as f64 / total as f64;
    assert!(frac >= 0.999, "scalar and simd argmax agree on {same}/{total} rows ({:.3}% < 99.9%)", 100.0 * frac);
}
