//! Shared test helpers: the golden top-32 files, scoring windows through the engine, and the
//! comparison metrics (coarsened KLD, same top-1, running chunk perplexity).
#![allow(dead_code)]

use lse_engine::{Engine, RowRequest};
use serde_json::Value;
use std::path::Path;

/// One scored row of a golden file.
pub struct GoldRow {
    pub target: u32,
    pub top: Vec<(u32, f64)>,
}

/// One window of a golden file: the ids fed and the scored rows (positions first..first+rows).
pub struct GoldWindow {
    pub input: Vec<u32>,
    pub rows: Vec<GoldRow>,
}

pub fn read_json(p: &Path) -> Value {
    let s = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
    serde_json::from_str(&s).unwrap_or_else(|e| panic!("parse {}: {e}", p.display()))
}

/// The scored rows of one golden window's `tokens` array.
pub fn parse_rows(tokens: &Value) -> Vec<GoldRow> {
    tokens
        .as_array()
        .unwrap()
        .iter()
        .map(|t| GoldRow {
            target: t["target"].as_u64().unwrap() as u32,
            top: t["top"].as_array().unwrap().iter().map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap())).collect(),
        })
        .collect()
}

/// `<name>.top32.json` of the synthetic set (input_tokens present).
pub fn synthetic_windows(v: &Value) -> Vec<GoldWindow> {
    v["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| GoldWindow {
            input: w["input_tokens"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect(),
            rows: parse_rows(&w["tokens"]),
        })
        .collect()
}

/// Running chunk perplexities of `s` (ctx `ctx`, rows from ctx/2 scored) and llama.cpp's from
/// `<name>.ppl.json` of the synthetic set, with the worst relative difference; prints a summary.
pub fn synthetic_ppl(name: &str, ctx: usize, tag: &str, s: &Scores) -> (Vec<f64>, Vec<f64>, f64) {
    let dir = lse_testdata::golden("synthetic");
    let gold: Vec<f64> =
        read_json(&dir.join(format!("{name}.ppl.json")))["chunk_ppl"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let ppl = s.running_ppl(ctx - ctx / 2 - 1);
    let worst = ppl.iter().zip(&gold).map(|(a, b)| (a / b - 1.0).abs()).fold(0.0, f64::max);
    eprintln!(
        "{tag}: mean KLD {:.3e} (max {:.3e}), top-1 {:.2}%, PPL {:.4} vs {:.4} (worst chunk diff {:.4}%)",
        s.mean_kld(),
        s.max_kld(),
        100.0 * s.top1(),
        ppl.last().unwrap(),
        gold.last().unwrap(),
        100.0 * worst
    );
    (ppl, gold, worst)
}

/// Per scored token: this engine's NLL, argmax, and coarsened KLD against the golden top-32.
#[derive(Default, Clone)]
pub struct Scores {
    pub nll: Vec<f64>,
    pub kld: Vec<f64>,
    pub same_top: Vec<bool>,
    pub argmax: Vec<u32>,
    /// mean |ours - golden| over the golden top-K log-probs, per row
    pub dlogp: Vec<f64>,
    /// this engine's log-probs of the golden ids (for plan/dialect comparisons)
    pub logp: Vec<Vec<f64>>,
}

impl Scores {
    pub fn mean_kld(&self) -> f64 {
        self.kld.iter().sum::<f64>() / self.kld.len().max(1) as f64
    }
    pub fn max_kld(&self) -> f64 {
        self.kld.iter().fold(0.0, |a: f64, &b| a.max(b))
    }
    pub fn mean_dlogp(&self) -> f64 {
        self.dlogp.iter().sum::<f64>() / self.dlogp.len().max(1) as f64
    }
    pub fn top1(&self) -> f64 {
        self.same_top.iter().filter(|&&b| b).count() as f64 / self.same_top.len().max(1) as f64
    }
    /// Running perplexity after each window of `per_window` tokens.
    pub fn running_ppl(&self, per_window: usize) -> Vec<f64> {
        let mut out = Vec::new();
        let mut sum = 0.0;
        for (i, x) in self.nll.iter().enumerate() {
            sum += x;
            if (i + 1) % per_window == 0 {
                out.push((sum / (i + 1) as f64).exp());
            }
        }
        out
    }
}

/// KLD of the golden distribution P (top-K log-probs + rest) from ours Q on the same ids.
pub fn coarse_kld(p_logp: &[f64], q_logp: &[f64]) -> f64 {
    const TINY: f64 = 1e-12;
    let mut k = 0.0;
    let (mut ps, mut qs) = (0.0, 0.0);
    for (&lp, &lq) in p_logp.iter().zip(q_logp) {
        let p = lp.exp();
        ps += p;
        qs += lq.exp();
        k += p * (lp - lq);
    }
    let pr = 1.0 - ps;
    let qr = (1.0 - qs).max(TINY);
    if pr > TINY {
        k += pr * (pr.ln() - qr.ln());
    }
    k
}

/// Scores windows: prefill `input`, rows at `first-1 ..` (the position predicting `first`).
pub fn score_windows(engine: &Engine, windows: &[GoldWindow], first_pos: usize) -> Scores {
    let mut s = Scores::default();
    for w in windows {
        let positions: Vec<usize> = (first_pos..first_pos + w.rows.len()).collect();
        let hidden = engine.prefill(&w.input, &positions).expect("prefill");
        let ids: Vec<Vec<u32>> = w.rows.iter().map(|r| std::iter::once(r.target).chain(r.top.iter().map(|t| t.0)).collect()).collect();
        let reqs: Vec<RowRequest> = ids.iter().map(|ids| RowRequest { ids, top_k: 0 }).collect();
        let red = engine.head_reduce(&hidden, &reqs).expect("head_reduce");
        for (r, g) in red.iter().zip(&w.rows) {
            let lz = r.max as f64 + r.sum_exp.ln();
            let lp: Vec<f64> = r.picked.iter().map(|&l| l as f64 - lz).collect();
            s.nll.push(-lp[0]);
            let p: Vec<f64> = g.top.iter().map(|t| t.1).collect();
            s.kld.push(coarse_kld(&p, &lp[1..]));
            s.dlogp.push(p.iter().zip(&lp[1..]).map(|(a, b)| (a - b).abs()).sum::<f64>() / p.len() as f64);
            s.same_top.push(r.argmax == g.top[0].0);
            s.argmax.push(r.argmax);
            s.logp.push(lp[1..].to_vec());
        }
    }
    s
}

/// Largest |a - b| over all log-probs of two runs on the same rows.
pub fn max_logp_diff(a: &Scores, b: &Scores) -> f64 {
    a.logp.iter().zip(&b.logp).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f64::max)
}

/// A copy of the model at `src` with metadata keys dropped or replaced, written to a temp file
/// named after `tag` (for load-error tests).
#[allow(dead_code)]
pub fn rewritten(src: &Path, tag: &str, drop: &[&str], set: &[(&str, lse_gguf::Value)]) -> std::path::PathBuf {
    let src = lse_gguf::GgufFile::open(src).expect("open model");
    let path = std::env::temp_dir().join(format!("lse-{tag}-{}.gguf", std::process::id()));
    lse_gguf::GgufWriter::copy_of(&src, drop, set).write(&path).expect("write rewritten gguf");
    path
}

/// Window length of the tiny-model goldens under data/golden/synthetic-{moe,dense} (8 chunks,
/// rows 64..126 scored).
#[allow(dead_code)]
pub const TINY_CTX: usize = 128;

/// llama.cpp's run of a tiny model under `data/golden/{folder}` with the same KV dtype:
/// `-fa on -ctk f16` or `-fa off -ctk f32`.
#[allow(dead_code)]
pub fn tiny_golden(folder: &str, name: &str, kv: lse_engine::KvDtype) -> Value {
    let tag = if kv == lse_engine::KvDtype::F16 { "fa-kvf16" } else { "dense-kvf32" };
    read_json(&lse_testdata::golden(&format!("{folder}/{name}.{tag}.json")))
}

/// (max |ΔNLL| over rows whose target is above llama.cpp's clamp, worst relative chunk-PPL diff).
#[allow(dead_code)]
pub fn tiny_nll_and_ppl(gold: &Value, s: &Scores) -> (f64, f64) {
    let rows = gold["windows"].as_array().unwrap().iter().flat_map(|w| w["tokens"].as_array().unwrap().iter());
    let d: Vec<f64> =
        rows.zip(&s.nll).filter(|(g, _)| g.get("nll_clamped").is_none()).map(|(g, ours)| (g["nll"].as_f64().unwrap() - ours).abs()).collect();
    let over = |t: f64| d.iter().filter(|&&x| x > t).count();
    eprintln!("rows {}: |dNLL| > 1e-3: {}, > 1e-2: {}", d.len(), over(1e-3), over(1e-2));
    let dnll = d.iter().copied().fold(0.0, f64::max);
    let gold_ppl: Vec<f64> = gold["chunk_ppl"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let ppl = s.running_ppl(TINY_CTX - TINY_CTX / 2 - 1);
    assert_eq!(ppl.len(), gold_ppl.len());
    (dnll, ppl.iter().zip(&gold_ppl).map(|(a, b)| (a / b - 1.0).abs()).fold(0.0, f64::max))
}

/// Engine options of the tiny-model checks: one window per pass unless `batch`/`ubatch` say.
#[allow(dead_code)]
pub fn tiny_opts(flash: bool, kv: lse_engine::KvDtype, batch: usize, ubatch: usize) -> lse_engine::EngineOptions {
    lse_engine::EngineOptions {
        threads: 2,
        batch_size: batch,
        ubatch_size: ubatch,
        kv_dtype: kv,
        kv_len: Some(TINY_CTX),
        flash_attention: flash,
        dialect: lse_engine::Dialect::Simd,
        ..lse_engine::EngineOptions::default()
    }
}

/// Every configuration (flash and dense, KV f16 and f32) of the tiny model `data/golden/{folder}/{name}.gguf`
/// against llama.cpp: max |ΔNLL| <= `nll_tol`, mean KLD <= `kld_tol`, chunk PPL within `ppl_tol`, same
/// top-1 on >= `top1_min` of the rows; prints this engine's own flash-vs-dense distance beside it.
#[allow(dead_code)]
pub fn check_tiny_model(folder: &str, name: &str, arch: &str, nll_tol: f64, kld_tol: f64, ppl_tol: f64, top1_min: f64) {
    let path = lse_testdata::golden(&format!("{folder}/{name}.gguf"));
    for kv in [lse_engine::KvDtype::F16, lse_engine::KvDtype::F32] {
        let gold = tiny_golden(folder, name, kv);
        let windows = synthetic_windows(&gold);
        let mut nlls: Vec<Vec<f64>> = Vec::new();
        for flash in [true, false] {
            let engine = Engine::load(&path, tiny_opts(flash, kv, TINY_CTX, TINY_CTX)).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(engine.architecture(), arch);
            let s = score_windows(&engine, &windows, TINY_CTX / 2);
            let (dnll, dppl) = tiny_nll_and_ppl(&gold, &s);
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
            nlls.push(s.nll);
        }
        let own = nlls[0].iter().zip(&nlls[1]).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        eprintln!("{name} kv={}: this engine's own flash vs dense max |dNLL| {own:.2e}", kv.name());
    }
}

/// The greedy request of one llama-server golden case (`n_predict`, `repeat_penalty`, `repeat_last_n`).
#[allow(dead_code)]
pub fn golden_greedy_request(c: &Value, prompt: lse_engine::Prompt, top_logprobs: usize) -> lse_engine::GenerateRequest {
    lse_engine::GenerateRequest {
        prompt,
        max_tokens: c["n_predict"].as_i64().unwrap(),
        sampling: lse_engine::SamplingParams {
            temperature: 0.0,
            repeat_penalty: c["repeat_penalty"].as_f64().unwrap() as f32,
            repeat_last_n: c["repeat_last_n"].as_i64().unwrap(),
            ..Default::default()
        },
        top_logprobs,
        ..Default::default()
    }
}
