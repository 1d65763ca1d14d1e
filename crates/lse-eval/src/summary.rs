//! Per-window records and their reduction into the SPEC §4 report.
//!
//! A run scores windows into [`WindowRecord`]s (per-window sums in f64, in position order), then
//! [`finish`] reduces them in window order and writes the report and the KL base. A merge of shards
//! reads the same records from the shard files and calls the same [`finish`], so merged shards give
//! the single run's numbers bit for bit, and its base byte for byte.

use crate::error::{EvalError, Result};
use crate::kld::{BaseRecords, LseBaseWriter, RunIdentity};
use crate::report::num;
use crate::stats::{percentile, Moments};
use serde_json::{json, Map, Value};

/// KL-divergence accumulators of one window (or, reduced, of a whole run).
#[derive(Debug, Clone, PartialEq)]
pub struct WindowKld {
    pub base_nll: Moments,
    pub log_ratio: Moments,
    pub kld: Moments,
    /// Every token's KLD, in position order (for the 99th percentile).
    pub klds: Vec<f64>,
    /// `-inf` when no token.
    pub kld_max: f64,
    pub same_top: usize,
    pub delta_p: Moments,
    pub top_mass: f64,
}

impl Default for WindowKld {
    fn default() -> Self {
        WindowKld {
            base_nll: Moments::default(),
            log_ratio: Moments::default(),
            kld: Moments::default(),
            klds: Vec::new(),
            kld_max: f64::NEG_INFINITY,
            same_top: 0,
            delta_p: Moments::default(),
            top_mass: 0.0,
        }
    }
}

impl WindowKld {
    /// One scored token: this run's NLL, the base's, the KLD, whether the top ids agree, the base's top mass.
    pub fn add(&mut self, nll: f64, base_nll: f64, kld: f64, same: bool, top_mass: f64) {
        self.base_nll.add(base_nll);
        self.log_ratio.add(nll - base_nll);
        self.kld.add(kld);
        self.klds.push(kld);
        self.kld_max = self.kld_max.max(kld);
        self.same_top += same as usize;
        self.delta_p.add((-nll).exp() - (-base_nll).exp());
        self.top_mass += top_mass;
    }

    /// Adds the next window's accumulators.
    pub fn merge(&mut self, o: &WindowKld) {
        self.base_nll.merge(&o.base_nll);
        self.log_ratio.merge(&o.log_ratio);
        self.kld.merge(&o.kld);
        self.klds.extend_from_slice(&o.klds);
        self.kld_max = self.kld_max.max(o.kld_max);
        self.same_top += o.same_top;
        self.delta_p.merge(&o.delta_p);
        self.top_mass += o.top_mass;
    }
}

/// One scored window: where it lies in the plan and its sums.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowRecord {
    pub index: usize,
    pub begin: usize,
    pub end: usize,
    pub first_target: usize,
    /// NLL of the scored tokens (`n` = tokens scored).
    pub nll: Moments,
    pub seconds: f64,
    /// Present when comparing against a KL base.
    pub kld: Option<WindowKld>,
}

/// What the report and the base header need besides the records: the plan and the model.
#[derive(Debug, Clone)]
pub struct RunMeta {
    pub run: RunIdentity,
    /// The base header's `model` object and the report's `config`.
    pub model: Value,
    pub config: Value,
    /// The base compared against: its name as given and its K (`kld.base`, `kld.top_k`).
    pub kld_base: Option<(String, usize)>,
    /// K of the base being recorded (0: none).
    pub base_top_k: usize,
}

/// A finished scoring pass (a whole run, or merged shards).
pub struct Outcome<'a> {
    pub token_ids: &'a [u32],
    pub records: &'a [WindowRecord],
    pub base_records: Option<&'a BaseRecords>,
    pub elapsed_seconds: f64,
    pub prefill_tokens: usize,
}

/// The records summed in window order, in f64.
pub fn reduce(records: &[WindowRecord]) -> (Moments, Option<WindowKld>) {
    let mut nll = Moments::default();
    let mut kld: Option<WindowKld> = None;
    for r in records {
        nll.merge(&r.nll);
        if let Some(k) = &r.kld {
            kld.get_or_insert_with(WindowKld::default).merge(k);
        }
    }
    (nll, kld)
}

/// Reduces the records into the SPEC §4 report and, when `base_out` is given, writes the KL base.
pub fn finish(meta: &RunMeta, o: &Outcome, include_windows: bool, include_token_ids: bool, base_out: Option<LseBaseWriter>) -> Result<Value> {
    let run = &meta.run;
    let (nll, kst) = reduce(o.records);
    let mean_nll = nll.mean();
    let ppl = mean_nll.exp();
    let ppl_unc = ppl * nll.sem();
    let elapsed = o.elapsed_seconds;
    check_finite("perplexity", ppl)?;
    check_finite("perplexity_uncertainty", ppl_unc)?;
    let mut rep = Map::new();
    rep.insert("object".into(), json!("lse.perplexity"));
    rep.insert("tokens".into(), json!(run.tokens));
    rep.insert("token_ids_sha256".into(), json!(run.token_ids_sha256));
    if include_token_ids {
        rep.insert("token_ids".into(), json!(o.token_ids));
    }
    rep.insert("method".into(), json!(run.method.name()));
    rep.insert("ctx".into(), json!(run.ctx));
    rep.insert("stride".into(), json!(run.stride));
    rep.insert("windows_scored".into(), json!(run.windows));
    rep.insert("scored_tokens".into(), json!(run.scored_tokens));
    rep.insert("mean_nll".into(), num(mean_nll));
    rep.insert("perplexity".into(), num(ppl));
    rep.insert("perplexity_uncertainty".into(), num(ppl_unc));
    rep.insert("elapsed_seconds".into(), num(elapsed));
    rep.insert("prefill_tokens".into(), json!(o.prefill_tokens));
    let tps = if elapsed > 0.0 { o.prefill_tokens as f64 / elapsed } else { 0.0 };
    rep.insert("prefill_tokens_per_second".into(), num(tps));
    rep.insert("config".into(), meta.config.clone());
    if let Some((name, top_k)) = &meta.kld_base {
        let mut kst = kst.unwrap_or_default();
        rep.insert("kld".into(), kld_json(name, *top_k, ppl, &mut kst)?);
    }
    if include_windows {
        let arr: Vec<Value> = o.records.iter().map(window_json).collect();
        rep.insert("windows".into(), Value::Array(arr));
    }
    if let Some(out) = base_out {
        let records = o.base_records.ok_or_else(|| EvalError::Output("no KL base records to write".into()))?;
        if records.count != run.scored_tokens || records.top_k != meta.base_top_k {
            return Err(EvalError::Output(format!(
                "KL base {}: {} records of K {} for {} scored tokens of K {}",
                out.path().display(),
                records.count,
                records.top_k,
                run.scored_tokens,
                meta.base_top_k
            )));
        }
        let header = LseBaseWriter::header(run, meta.base_top_k, ppl, meta.model.clone(), meta.config.clone());
        out.finish(&header, records)?;
    }
    Ok(Value::Object(rep))
}

fn kld_json(name: &str, top_k: usize, ppl: f64, kst: &mut WindowKld) -> Result<Value> {
    let n = kst.kld.n;
    let base_ppl = kst.base_nll.mean().exp();
    kst.klds.sort_by(f64::total_cmp);
    let top = if n > 0 { kst.same_top as f64 / n as f64 } else { 0.0 };
    let top_unc = if n > 1 { (top * (1.0 - top) / (n as f64 - 1.0)).max(0.0).sqrt() } else { 0.0 };
    let rms = if n > 0 { (kst.delta_p.sum_sq / n as f64).sqrt() } else { 0.0 };
    let vals = [
        ("base_perplexity", base_ppl),
        ("perplexity", ppl),
        ("delta_perplexity", ppl - base_ppl),
        ("perplexity_ratio", ppl / base_ppl),
        ("mean_log_ratio", kst.log_ratio.mean()),
        ("mean_log_ratio_uncertainty", kst.log_ratio.sem()),
        ("mean_kld", kst.kld.mean()),
        ("mean_kld_uncertainty", kst.kld.sem()),
        ("kld_p99", percentile(&kst.klds, 0.99)),
        ("kld_max", if n > 0 { kst.kld_max } else { 0.0 }),
        ("same_top", top),
        ("same_top_uncertainty", top_unc),
        ("mean_delta_p", kst.delta_p.mean()),
        ("mean_delta_p_uncertainty", kst.delta_p.sem()),
        ("rms_delta_p", rms),
        ("mean_base_top_mass", if n > 0 { kst.top_mass / n as f64 } else { 0.0 }),
    ];
    let mut k = Map::new();
    k.insert("base".into(), json!(name));
    k.insert("top_k".into(), json!(top_k));
    k.insert("tokens".into(), json!(n));
    for (key, x) in vals {
        check_finite(key, x)?;
        k.insert(key.into(), num(x));
    }
    Ok(Value::Object(k))
}

fn window_json(r: &WindowRecord) -> Value {
    let s = r.nll.n;
    let mean = if s > 0 { r.nll.sum / s as f64 } else { 0.0 };
    json!({
        "index": r.index, "begin": r.begin, "end": r.end, "first_target": r.first_target,
        "scored": s, "nll_sum": num(r.nll.sum), "mean_nll": num(mean),
        "perplexity": num(mean.exp()), "seconds": num(r.seconds),
    })
}

pub(crate) fn check_finite(what: &str, x: f64) -> Result<()> {
    if x.is_finite() {
        Ok(())
    } else {
        Err(EvalError::Engine(format!("{what} is not finite ({x})")))
    }
}
