//! The scoring loop: tokens -> plan -> fresh-session prefill per window -> LM head in blocks ->
//! per-token NLL (and KLD) -> the SPEC §4 report.

use crate::error::{EvalError, Result};
use crate::input::token_ids_sha256;
use crate::atomic::AtomicFile;
use crate::kld::{llama_kld, BaseRecords, KldBase, LlamaRow, LseBaseWriter, LseRecord, RunIdentity};
use crate::plan::{plan_chunks, plan_pairs, plan_sliding, Method, Window};
use crate::request::{PerplexityInput, PerplexityRequest, ShardSpec, DEFAULT_CTX};
use crate::scorer::{Reduction, RowRequest, Scorer};
use crate::shard_file::{file_sha256, ShardFile, LSE_VERSION};
use crate::stats::{kld_top_k, log_prob, Moments};
use crate::summary::{finish, Outcome, RunMeta, WindowKld, WindowRecord};
use serde_json::{json, Value};
use std::time::Instant;

/// Where a run stands, passed to `Progress::update` after every window (and once before the first).
#[derive(Debug, Clone, Copy)]
pub struct ProgressInfo {
    pub windows_done: usize,
    pub windows_total: usize,
    /// Tokens sent through prefill so far, and in the whole plan.
    pub tokens_done: usize,
    pub tokens_total: usize,
    pub elapsed_seconds: f64,
}

/// Receives progress; the CLI draws it on stderr.
pub trait Progress {
    fn update(&mut self, info: &ProgressInfo);
    fn finish(&mut self) {}
    /// Whether the caller has stopped waiting for the report (a server's client went away): the
    /// run then ends before its next window with [`EvalError::Cancelled`].
    fn cancelled(&self) -> bool {
        false
    }
}

/// No progress output.
pub struct NoProgress;
impl Progress for NoProgress {
    fn update(&mut self, _: &ProgressInfo) {}
}

/// The checks and files a run needs before any model work: options validated, the KLD base opened
/// and its settings checked, the base output's temporary file created (proving the path writable).
pub struct Preflight {
    base: Option<KldBase>,
    base_out: Option<LseBaseWriter>,
    /// A shard run: its spec, its shard file, and the compared base's SHA-256.
    shard: Option<(ShardSpec, AtomicFile, Option<String>)>,
}

/// Validates `req` and opens its files. Call before loading the model to fail fast.
pub fn preflight(req: &PerplexityRequest) -> Result<Preflight> {
    req.validate()?;
    let method = req.method();
    let base = match &req.kld_base {
        Some(p) => {
            let b = KldBase::open(p)?;
            let (ctx, stride) = match method {
                Method::Pairs => (None, None),
                _ => {
                    let ctx = req.ctx.unwrap_or(DEFAULT_CTX);
                    (Some(ctx), Some(req.stride.unwrap_or(ctx)))
                }
            };
            b.check_settings(method, ctx, stride, req.chunks)?;
            Some(b)
        }
        None => None,
    };
    if let Some(p) = &req.kld_base_out {
        if req.kld_base.as_deref().is_some_and(|b| crate::atomic::same_file(b, p)) {
            return Err(EvalError::InvalidOption(format!(
                "--perplexity-kld-base-out {} is also the base being compared against",
                p.display()
            )));
        }
    }
    // A shard records its part of the base in its shard file; the merge writes the base.
    let shard = match (req.shard, &req.shard_out) {
        (Some(spec), Some(out)) => {
            let base_sha = match &req.kld_base {
                Some(p) => Some(file_sha256(p, "KLD base")?),
                None => None,
            };
            Some((spec, AtomicFile::create(out, "shard file")?, base_sha))
        }
        _ => None,
    };
    let base_out = match (&req.kld_base_out, &shard) {
        (Some(p), None) => Some(LseBaseWriter::create(p)?),
        _ => None,
    };
    Ok(Preflight { base, base_out, shard })
}

/// `preflight` + `run_prepared`.
pub fn run_with<S: Scorer>(scorer: &S, req: &PerplexityRequest, progress: &mut dyn Progress) -> Result<Value> {
    let pre = preflight(req)?;
    run_prepared(scorer, req, pre, progress)
}

/// Why pairs score no token: every response is empty, or a record has neither prompt nor BOS
/// before a one-token response (a response's first token is predicted from what precedes it).
fn nothing_to_score(input: &PerplexityInput, lens: &[(usize, usize)]) -> String {
    let recs = match input {
        PerplexityInput::Pairs(r) => &r[..],
        _ => &[],
    };
    match recs.iter().zip(lens).find(|(_, &(prompt, total))| prompt == 0 && total > 0) {
        Some((r, _)) => format!(
            "no response token to score: the prompt of pairs line {} is empty and the model adds no BOS, so its one-token response has nothing before it to be predicted from",
            r.line
        ),
        None => "no response token to score: every record's response is empty".into(),
    }
}

fn non_finite(w: &Window, pos: usize) -> EvalError {
    EvalError::Engine(format!("non-finite logits in window {} at position {pos}", w.index))
}

/// `max`, `sum(exp(l - max))` (f32 exp, f64 sum), argmax (first), picked logits and top-K of a full row.
pub fn reduce_full(row: &[f32], ids: &[u32], top_k: usize) -> Reduction {
    let mut m = f32::NEG_INFINITY;
    let mut am = 0usize;
    for (i, &l) in row.iter().enumerate() {
        if l > m {
            m = l;
            am = i;
        }
    }
    let s: f64 = row.iter().map(|&l| (l as f64 - m as f64).exp()).sum();
    let mut top: Vec<(u32, f32)> = Vec::new();
    if top_k > 0 {
        let mut idx: Vec<u32> = (0..row.len() as u32).collect();
        let k = top_k.min(row.len());
        let cmp = |a: &u32, b: &u32| row[*b as usize].total_cmp(&row[*a as usize]).then(a.cmp(b));
        idx.select_nth_unstable_by(k - 1, cmp);
        idx.truncate(k);
        idx.sort_by(cmp);
        top = idx.into_iter().map(|i| (i, row[i as usize])).collect();
    }
    Reduction { max: m, sum_exp: s, argmax: am as u32, picked: ids.iter().map(|&i| row[i as usize]).collect(), top }
}

/// Runs a prepared request on `scorer` and returns the SPEC §4 report; with `req.shard`, scores
/// only that shard's windows, writes the shard file and returns a short `lse.perplexity-shard` object.
pub fn run_prepared<S: Scorer>(scorer: &S, req: &PerplexityRequest, pre: Preflight, progress: &mut dyn Progress) -> Result<Value> {
    let t0 = Instant::now();
    let Preflight { mut base, base_out, shard } = pre;
    let method = req.method();
    let n_vocab = scorer.n_vocab();
    let kv = scorer.kv_capacity();

    // 1. Token ids.
    let mut pair_lens = Vec::new();
    let tokens: Vec<u32> = match &req.input {
        PerplexityInput::Text(s) => scorer.tokenize(s, true),
        PerplexityInput::Tokens(v) => {
            lse_engine::check_token_ids(v, n_vocab).map_err(|e| EvalError::Input(e.to_string()))?;
            v.clone()
        }
        PerplexityInput::Pairs(recs) => {
            let mut all = Vec::new();
            for r in recs.iter().take(req.chunks.unwrap_or(usize::MAX)) {
                let p = scorer.tokenize(&r.prompt, true);
                let resp = scorer.tokenize(&r.response, false);
                let total = p.len() + resp.len();
                if total > kv {
                    return Err(EvalError::WindowTooLarge(format!(
                        "pairs line {}: the record has {total} tokens, more than the KV capacity of {kv} (--kv-len)",
                        r.line
                    )));
                }
                pair_lens.push((p.len(), total));
                all.extend(p);
                all.extend(resp);
            }
            all
        }
    };
    let sha = token_ids_sha256(&tokens);

    // 2. Plan.
    let bos = if scorer.add_bos() { scorer.bos_id() } else { None };
    let bos_replace = bos.is_some();
    let mut chunks_limit = req.chunks;
    let (windows, ctx, stride) = match method {
        Method::Chunks => {
            let ctx = req.ctx.unwrap_or(DEFAULT_CTX);
            if let Some(KldBase::Llama(b)) = &base {
                chunks_limit = Some(b.n_chunk);
                if tokens.len() < b.n_chunk * ctx {
                    b.check_run(&tokens, n_vocab)?; // names the token count
                }
            }
            check_kv(ctx, kv)?;
            (plan_chunks(tokens.len(), ctx, chunks_limit, bos_replace)?, ctx, ctx)
        }
        Method::Sliding => {
            let ctx = req.ctx.unwrap_or(DEFAULT_CTX);
            let stride = req.stride.unwrap_or(ctx);
            check_kv(ctx.min(tokens.len()), kv)?;
            (plan_sliding(tokens.len(), ctx, stride, req.chunks, bos_replace)?, ctx, stride)
        }
        Method::Pairs => {
            let w = plan_pairs(&pair_lens, req.chunks);
            let ctx = pair_lens.iter().map(|p| p.1).max().unwrap_or(0);
            (w, ctx, ctx)
        }
    };
    let scored_total: usize = windows.iter().map(|w| w.scored()).sum();
    if scored_total == 0 {
        return Err(EvalError::InvalidOption(match method {
            Method::Pairs => nothing_to_score(&req.input, &pair_lens),
            _ => format!("--perplexity-ctx {ctx} scores no token (a window scores only its second half): use a ctx of at least 3"),
        }));
    }
    let run = RunIdentity {
        token_ids_sha256: sha.clone(),
        tokens: tokens.len(),
        method,
        ctx,
        stride,
        chunks: req.chunks,
        windows: windows.len(),
        scored_tokens: scored_total,
        n_vocab,
    };
    match &base {
        Some(KldBase::Lse(b)) => b.check_run(&run)?,
        Some(KldBase::Llama(b)) => {
            b.check_run(&tokens, n_vocab)?;
            if windows.len() != b.n_chunk {
                return Err(EvalError::KldBase(format!(
                    "KLD base {} does not match this run: chunks is {} in the base but {} here",
                    b.path.display(),
                    b.n_chunk,
                    windows.len()
                )));
            }
        }
        None => {}
    }
    let k_out = if req.kld_base_out.is_some() { req.top_k() } else { 0 };
    if k_out > n_vocab {
        return Err(EvalError::InvalidOption(format!("--perplexity-kld-top-k {k_out} exceeds the vocabulary size {n_vocab}")));
    }

    if let Some((spec, ..)) = &shard {
        // more shards than windows leave some empty, and their merge would need every one of them
        if spec.count > windows.len() {
            return Err(EvalError::InvalidOption(format!(
                "--perplexity-shard {}/{}: this run has only {} windows; use at most {} shards",
                spec.index,
                spec.count,
                windows.len(),
                windows.len()
            )));
        }
    }

    // 3. Score this run's windows (a shard's share, or all).
    let (w0, w1) = shard.as_ref().map_or((0, windows.len()), |s| s.0.range(windows.len()));
    let mine = &windows[w0..w1];
    if let Some(b) = base.as_mut() {
        b.skip(windows[..w0].iter().map(|w| w.scored()).sum())?;
    }
    let tokens_total: usize = mine.iter().map(|w| if w.scored() > 0 { w.len() } else { 0 }).sum();
    let head_rows = scorer.head_rows().max(1);
    let mut records: Vec<WindowRecord> = Vec::with_capacity(mine.len());
    let mut base_records = (k_out > 0).then(|| BaseRecords::new(k_out));
    let mut prefill_tokens = 0usize;
    let mut lse_recs: Vec<LseRecord> = Vec::new();
    let mut llama_row = LlamaRow::default();
    progress.update(&ProgressInfo {
        windows_done: 0,
        windows_total: mine.len(),
        tokens_done: 0,
        tokens_total,
        elapsed_seconds: t0.elapsed().as_secs_f64(),
    });
    let per_pass = scorer.windows_per_pass(ctx).max(1);
    let mut prefilled: std::collections::VecDeque<S::Rows> = Default::default();
    for (wi, w) in mine.iter().enumerate() {
        if progress.cancelled() {
            return Err(EvalError::Cancelled);
        }
        let tw = Instant::now();
        let positions: Vec<usize> = w.positions().collect();
        let mut wnll = Moments::default();
        let mut wkld = base.as_ref().map(|_| WindowKld::default());
        if !positions.is_empty() {
            if prefilled.is_empty() {
                // this window and the next scored ones that share its pass
                let group: Vec<(Vec<u32>, Vec<usize>)> = mine[wi..]
                    .iter()
                    .filter(|g| g.scored() > 0)
                    .take(per_pass)
                    .map(|g| (g.input(&tokens, bos), g.positions().collect()))
                    .collect();
                let views: Vec<(&[u32], &[usize])> = group.iter().map(|(i, p)| (&i[..], &p[..])).collect();
                prefilled.extend(scorer.prefill_windows(&views)?);
                prefill_tokens += group.iter().map(|(i, _)| i.len()).sum::<usize>();
            }
            let rows = prefilled.pop_front().ok_or_else(|| EvalError::Engine("prefill returned fewer windows than asked".into()))?;
            for (bi, block) in positions.chunks(head_rows).enumerate() {
                let r0 = bi * head_rows;
                let range = r0..r0 + block.len();
                let targets: Vec<u32> = block.iter().map(|&p| tokens[w.begin + p + 1]).collect();
                let mut llama_klds: Vec<(f64, f64, usize, f64)> = Vec::new();
                let reds: Vec<Reduction> = match base.as_mut() {
                    Some(KldBase::Llama(b)) => {
                        let logits = scorer.head_logits(&rows, range.clone())?;
                        if logits.len() != block.len() * n_vocab {
                            return Err(EvalError::Engine(format!(
                                "head_logits returned {} values for {} rows of {n_vocab}",
                                logits.len(),
                                block.len()
                            )));
                        }
                        let mut out = Vec::with_capacity(block.len());
                        for (j, row) in logits.chunks_exact(n_vocab).enumerate() {
                            if row.iter().any(|x| !x.is_finite()) {
                                return Err(non_finite(w, block[j]));
                            }
                            b.next(&mut llama_row)?;
                            llama_klds.push(llama_kld(row, &llama_row, targets[j] as usize));
                            out.push(reduce_full(row, &targets[j..j + 1], k_out));
                        }
                        out
                    }
                    Some(KldBase::Lse(b)) => {
                        lse_recs.resize_with(block.len(), LseRecord::default);
                        let mut reqs = Vec::with_capacity(block.len());
                        for (j, rec) in lse_recs.iter_mut().enumerate() {
                            b.next(rec, w.index)?;
                            let mut ids = Vec::with_capacity(1 + rec.ids.len());
                            ids.push(targets[j]);
                            ids.extend_from_slice(&rec.ids);
                            reqs.push(RowRequest { ids, top_k: k_out });
                        }
                        scorer.head_reduce(&rows, range.clone(), &reqs)?
                    }
                    None => {
                        let reqs: Vec<RowRequest> = targets.iter().map(|&t| RowRequest { ids: vec![t], top_k: k_out }).collect();
                        scorer.head_reduce(&rows, range.clone(), &reqs)?
                    }
                };
                if reds.len() != block.len() {
                    return Err(EvalError::Engine(format!("head_reduce returned {} rows for {}", reds.len(), block.len())));
                }
                for (j, r) in reds.iter().enumerate() {
                    let ok = r.max.is_finite()
                        && r.sum_exp.is_finite()
                        && r.sum_exp >= 1.0
                        && r.picked.iter().all(|x| x.is_finite())
                        && r.top.iter().all(|t| t.1.is_finite());
                    if !ok || r.picked.is_empty() {
                        return Err(non_finite(w, block[j]));
                    }
                    let ln_s = r.sum_exp.ln();
                    let v = -log_prob(r.picked[0], r.max, ln_s);
                    wnll.add(v);
                    if let Some(out) = base_records.as_mut() {
                        out.push(v, r.top.iter().map(|&(id, l)| (id, log_prob(l, r.max, ln_s) as f32)));
                    }
                    match &base {
                        Some(KldBase::Lse(_)) => {
                            let rec = &lse_recs[j];
                            let base_lp: Vec<f64> = rec.logp.iter().map(|&x| x as f64).collect();
                            let this_lp: Vec<f64> = r.picked[1..].iter().map(|&l| log_prob(l, r.max, ln_s)).collect();
                            let (k, mass) = kld_top_k(&base_lp, &this_lp);
                            if let Some(a) = wkld.as_mut() {
                                a.add(v, rec.nll, k, rec.ids.first() == Some(&r.argmax), mass);
                            }
                        }
                        Some(KldBase::Llama(_)) => {
                            let (k, base_nll, ib, mass) = llama_klds[j];
                            if let Some(a) = wkld.as_mut() {
                                a.add(v, base_nll, k, ib == r.argmax as usize, mass);
                            }
                        }
                        None => {}
                    }
                }
            }
        }
        records.push(WindowRecord {
            index: w.index,
            begin: w.begin,
            end: w.end,
            first_target: w.first_target,
            nll: wnll,
            seconds: tw.elapsed().as_secs_f64(),
            kld: wkld,
        });
        progress.update(&ProgressInfo {
            windows_done: records.len(),
            windows_total: mine.len(),
            tokens_done: prefill_tokens,
            tokens_total,
            elapsed_seconds: t0.elapsed().as_secs_f64(),
        });
    }
    progress.finish();

    // 4. The shard file, or the report (and the base).
    let meta = RunMeta {
        run,
        model: scorer.model_json(),
        config: scorer.config_json(),
        kld_base: base.as_ref().map(KldBase::name_and_top_k),
        base_top_k: k_out,
    };
    let elapsed_seconds = t0.elapsed().as_secs_f64();
    if let Some((spec, out, base_sha)) = shard {
        let path = out.path().display().to_string();
        let file = ShardFile {
            lse_version: LSE_VERSION.to_string(),
            index: spec.index,
            count: spec.count,
            first_window: w0,
            end_window: w1,
            meta,
            model_sha256: req.model_sha256.clone(),
            kld_base_sha256: base_sha,
            kld_base_out: req.kld_base_out.as_ref().map(|p| p.display().to_string()),
            include_windows: req.include_windows,
            include_token_ids: req.include_token_ids,
            elapsed_seconds,
            prefill_tokens,
            token_ids: tokens,
            records,
            base: base_records,
        };
        file.write(out)?;
        return Ok(json!({
            "object": "lse.perplexity-shard", "shard_index": spec.index, "shard_count": spec.count,
            "first_window": w0, "end_window": w1, "windows": windows.len(), "path": path,
        }));
    }
    let outcome = Outcome { token_ids: &tokens, records: &records, base_records: base_records.as_ref(), elapsed_seconds, prefill_tokens };
    finish(&meta, &outcome, req.include_windows, req.include_token_ids, base_out)
}

fn check_kv(len: usize, kv: usize) -> Result<()> {
    if len > kv {
        return Err(EvalError::WindowTooLarge(format!(
            "a window of {len} tokens (--perplexity-ctx) does not fit the KV capacity of {kv} tokens (--kv-len)"
        )));
    }
    Ok(())
}
