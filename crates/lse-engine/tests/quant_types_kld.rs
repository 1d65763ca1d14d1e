//! Issue 13's acceptance line for the new quant types, at engine level: a synthetic llama
//! (data/golden/synthetic-quant, scripts/make-synthetic-quant.py) quantized by llama-quantize to each
//! type scores within mean KLD 1e-3 of llama.cpp's own log-probs on the same file (ctx 128, 4
//! windows, rows 64..126; llama.cpp's run: flash attention, KV f16).
//!
//! The KLD here is the golden's top-12 + rest (`common::coarse_kld`, a lower bound of the
//! full-vocabulary KLD). The full-vocabulary numbers (lse-server --perplexity-kld against
//! llama.cpp's 8-chunk bases) are in the folder's README; both are far below the bound. For scale:
//! the engine on the IQ4_XS file against llama.cpp's IQ4_NL run (the same weights, another 4-bit
//! rounding) gives 9.4e-3, IQ1_M against IQ1_S 1.3: a wrong kernel cannot hide under 1e-3.

mod common;

use common::*;
use lse_engine::{Dialect, Engine, EngineOptions, KvDtype};
use std::path::PathBuf;

const CTX: usize = 128;

/// The bound of issue 13. It holds with room for every type: llama.cpp's own noise on these files
/// (its `-fa off` run against its `-fa on` run, full vocabulary, 8 chunks: noise.tsv in the data
/// folder) is 2.6e-5 .. 2.9e-4, and this engine's KLD against llama.cpp is ~4e-6 (README).
const MAX_MEAN_KLD: f64 = 1e-3;

/// (file suffix, the ggml type every matrix of the file has).
const TYPES: &[(&str, &str)] = &[
    ("iq4_nl", "iq4_nl"),
    ("iq4_xs", "iq4_xs"),
    ("iq2_xxs", "iq2_xxs"),
    ("iq2_xs", "iq2_xs"),
    ("iq2_s", "iq2_s"),
    ("iq3_xxs", "iq3_xxs"),
    ("iq3_s", "iq3_s"),
    ("iq1_s", "iq1_s"),
    ("iq1_m", "iq1_m"),
    ("tq1_0", "tq1_0"),
    ("tq2_0", "tq2_0"),
    ("mxfp4", "mxfp4"),
    ("nvfp4", "nvfp4"),
    ("q1_0", "q1_0"),
    ("q2_0", "q2_0"),
];

fn dir() -> PathBuf {
    lse_testdata::golden("synthetic-quant")
}

#[allow(clippy::needless_update)] // `simd` and later fields come from the default
fn opts(flash: bool, dialect: Dialect) -> EngineOptions {
    EngineOptions {
        threads: 2,
        batch_size: CTX,
        ubatch_size: CTX,
        kv_dtype: KvDtype::F16,
        kv_len: Some(CTX),
        flash_attention: flash,
        dialect,
        cpu_fallback_allowed: true,
        simd: None,
        ..Default::default()
    }
}

/// Every matrix of the file is of type `want` (so the file really exercises that format).
fn check_types(path: &std::path::Path, want: &str) {
    let f = lse_gguf::GgufFile::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for t in f.tensors() {
        let ty = t.ggml_type.name().to_ascii_lowercase();
        assert!(ty == want || (t.dims.len() == 1 && ty == "f32"), "{}: {} is {ty}, not {want}", path.display(), t.name);
    }
}

#[test]
fn new_quant_types_match_llamacpp() {
    let mut failures = Vec::new();
    for &(suffix, ty) in TYPES {
        let model = dir().join(format!("llama-q-{suffix}.gguf"));
        check_types(&model, ty);
        let gold = read_json(&dir().join(format!("llama-q-{suffix}.fa-kvf16.json")));
        let windows = synthetic_windows(&gold);
        // SIMD flash and dense, and the scalar kernels (ggml's generic integer math) once
        for (flash, dialect) in [(true, Dialect::Simd), (false, Dialect::Simd), (true, Dialect::Scalar)] {
            let engine = Engine::load(&model, opts(flash, dialect)).unwrap_or_else(|e| panic!("{suffix}: {e}"));
            let s = score_windows(&engine, &windows, CTX / 2);
            let ppl = s.running_ppl(CTX - CTX / 2 - 1);
            let gold_ppl = gold["chunk_ppl"][windows.len() - 1].as_f64().unwrap();
            eprintln!(
                "{suffix} flash={flash} {dialect:?}: mean KLD {:.2e} (max {:.2e}), same top-1 {:.2}%, PPL {:.4} (llama.cpp {gold_ppl})",
                s.mean_kld(),
                s.max_kld(),
                100.0 * s.top1(),
                ppl.last().unwrap()
            );
            if s.mean_kld() > MAX_MEAN_KLD {
                failures.push(format!("{suffix} flash={flash} {dialect:?}: mean KLD {:.3e} > {MAX_MEAN_KLD:e}", s.mean_kld()));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
