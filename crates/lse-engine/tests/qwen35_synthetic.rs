//! qwen35-tiny (3 gated-delta-net layers + 1 gated full-attention layer) against llama.cpp's
//! top-32 log-probs and chunk perplexities (`shared/golden/synthetic`, ctx 128, 8 chunks,
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
    }
}

fn run(o: EngineOptions) -> Scores {
    let dir = lse_testdata::shared("golden/synthetic");
    let engine = Engine::load(&dir.join(format!("{NAME}.gguf")), o).unwrap_or_else(|e| panic!("{NAME}: {e}"));
    assert_eq!(engine.architecture(), "qwen35");
    let gold = read_json(&dir.join(format!("{NAME}.top32.json")));
    score_windows(&engine, &synthetic_windows(&gold), CTX / 2)
}

/// Asserts the acceptance bounds (mean KLD <= 1e-3, same top-1 >= 98%, every running chunk
/// PPL within 0.5% of llama.cpp's) and prints the measured numbers.
fn check(tag: &str, s: &Scores) {
    let dir = lse_testdata::shared("golden/synthetic");
    let ppl_gold: Vec<f64> =
        read_json(&dir.join(format!("{NAME}.ppl.json")))["chunk_ppl"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let ppl = s.running_ppl(CTX - CTX / 2 - 1);
    let worst = ppl.iter().zip(&ppl_gold).map(|(a, b)| (a / b - 1.0).abs()).fold(0.0, f64::max);
    eprintln!(
        "{NAME} {tag}: mean KLD {:.3e} (max {:.3e}), top-1 {:.2}%, PPL {:.4} vs {:.4} (worst chunk diff {:.4}%)",
        s.mean_kld(),
        s.max_kld(),
        100.0 * s.top1(),
        ppl.last().unwrap(),
        ppl_gold.last().unwrap(),
        100.0 * worst
    );
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
    // (batch, ubatch): 16-token launches in 64-token passes; odd launches that leave 1-token tails
    // (64 = 9·7 + 1), shorter than the conv history; and token-at-a-time decoding.
    for (batch, ubatch) in [(64, 16), (64, 7), (CTX, 1)] {
        let s = run(opts(true, KvDtype::F16, batch, ubatch, 2));
        let d = max_logp_diff(&base, &s);
        let same = base.argmax.iter().zip(&s.argmax).filter(|(a, b)| a == b).count();
        eprintln!("{NAME} batch {batch} ubatch {ubatch}: max |dlogp| vs one pass {d:.2e}, same argmax {same}/{}", s.argmax.len());
        assert!(d < 2e-3, "batch {batch} ubatch {ubatch}: log-probs moved by {d:.2e}");
        assert!(same * 1000 >= s.argmax.len() * 998, "batch {batch} ubatch {ubatch}: argmax changed on {} rows", s.argmax.len() - same);
        check(&format!("batch={batch} ubatch={ubatch}"), &s);
    }
}
