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
