//! Prompt log-probs (`echo` + `logprobs`) through the scoring path: one fresh-session prefill,
//! the LM head reduced per row, and `log p = (picked - max) - ln(sum_exp)` in f64, exactly as
//! lse-eval computes a token's NLL, so they equal `--perplexity-pairs`/`--perplexity-tokens`.

use super::errors::{from_engine, ApiError};
use lse_engine::{Engine, RowRequest};

/// The log-prob of prompt token `i + 1` given tokens `0..=i`, and the `top_k` most likely tokens.
#[derive(Clone, Debug)]
pub struct PromptLogprob {
    pub logprob: f64,
    pub top: Vec<(u32, f64)>,
}

/// Scores every prompt token after the first.
pub fn prompt_logprobs(engine: &Engine, ids: &[u32], top_k: usize) -> Result<Vec<PromptLogprob>, ApiError> {
    if let Some((i, &id)) = ids.iter().enumerate().find(|(_, &t)| t as usize >= engine.n_vocab()) {
        return Err(ApiError::bad_request(format!("token id {id} at index {i} is outside the vocabulary of {}", engine.n_vocab())));
    }
    if ids.len() > engine.kv_capacity() {
        return Err(ApiError::bad_request(format!(
            "the prompt has {} tokens; the context holds {} (--kv-len)",
            ids.len(),
            engine.kv_capacity()
        )));
    }
    if ids.len() < 2 {
        return Ok(Vec::new());
    }
    let positions: Vec<usize> = (0..ids.len() - 1).collect();
    let rows = engine.prefill(ids, &positions).map_err(|e| from_engine(&e))?;
    let reqs: Vec<RowRequest> = positions.iter().map(|&p| RowRequest { ids: &ids[p + 1..p + 2], top_k }).collect();
    let reds = engine.head_reduce(&rows, &reqs).map_err(|e| from_engine(&e))?;
    Ok(reds
        .iter()
        .map(|r| {
            let ln_s = r.sum_exp.ln();
            let lp = |l: f32| lse_eval::stats::log_prob(l, r.max, ln_s);
            PromptLogprob { logprob: lp(r.picked[0]), top: r.top.iter().map(|&(id, l)| (id, lp(l))).collect() }
        })
        .collect())
}
