//! Prompt log-probs (`echo` + `logprobs`) through the scoring path: the prompt's rows through
//! the engine's forward in a session, the LM head reduced per row, and
//! `log p = (picked - max) - ln(sum_exp)` in f64, exactly as lse-eval computes a token's NLL, so
//! they equal `--perplexity-pairs`/`--perplexity-tokens`. Earlier prompts' sessions and log-probs
//! are kept ([`ScoredPrompts`]): lm-eval scores several continuations of one context, and a prompt
//! that shares a prefix with a kept one runs only the rest (batch invariance: the same values).

use super::errors::{from_engine, ApiError};
use super::session_cache::Kept;
use lse_engine::{common_prefix, Batch, Engine, RowRequest, Session};

/// The log-prob of prompt token `i + 1` given tokens `0..=i`, and the `top_k` most likely tokens.
#[derive(Clone, Debug)]
pub struct PromptLogprob {
    pub logprob: f64,
    pub top: Vec<(u32, f64)>,
}

/// A scored prompt: its session (every token fed) and its log-probs with `top_k` alternatives.
pub struct Scored {
    ids: Vec<u32>,
    top_k: usize,
    lps: Vec<PromptLogprob>,
    session: Session,
}

/// Scored prompts kept, least recently used first.
pub type ScoredPrompts = Kept<Scored>;

impl Kept<Scored> {
    /// The kept prompt (same `top_k`) sharing the longest prefix with `ids`, if it shares two
    /// tokens or more (one kept log-prob), and that prefix's length.
    fn take_scored(&mut self, ids: &[u32], top_k: usize) -> Option<(Scored, usize)> {
        self.take_best(2, |s| (s.top_k == top_k).then(|| common_prefix(&s.ids, ids)))
    }
}

/// Prompt tokens one forward of [`prompt_logprobs`] takes: between slices its caller may run
/// other work and say whether the client is still there (a long prompt is tens of seconds of
/// the scheduler's thread). The log-probs are the same whatever the slicing (batch invariance).
const SCORE_SLICE: usize = 512;

/// Scores every prompt token after the first; also returns how many of those log-probs (and the
/// KV rows before them) came from a kept prompt (`reuse`: look for one). Before each slice of
/// [`SCORE_SLICE`] tokens calls `between`, and stops once it says nobody waits for the answer.
pub fn prompt_logprobs(
    engine: &Engine,
    ids: &[u32],
    top_k: usize,
    reuse: bool,
    kept: &mut ScoredPrompts,
    between: &mut dyn FnMut() -> bool,
) -> Result<(Vec<PromptLogprob>, usize), ApiError> {
    super::options::ids_in_vocabulary(ids, engine.n_vocab(), None)?;
    super::options::prompt_fits(ids.len(), engine.kv_capacity(), false)?;
    if ids.len() < 2 {
        return Ok((Vec::new(), 0));
    }
    // log-prob p needs tokens 0..=p+1: with c tokens in common, 0..c-1 are kept, and token c-1
    // runs again (its hidden row now predicts another token)
    let (mut session, mut lps, keep) = match if reuse { kept.take_scored(ids, top_k) } else { None } {
        Some((mut s, c)) => {
            let keep = c - 1;
            s.lps.truncate(keep);
            match s.session.truncate(keep) {
                Ok(()) => (s.session, s.lps, keep),
                // recurrent state: all or nothing
                Err(_) => {
                    s.session.reset();
                    (s.session, Vec::new(), 0)
                }
            }
        }
        None => (engine.new_session(None).map_err(|e| from_engine(&e))?, Vec::new(), 0),
    };
    for a in (keep..ids.len()).step_by(SCORE_SLICE) {
        if !between() {
            return Err(crate::http::errors::stopped());
        }
        let b = (a + SCORE_SLICE).min(ids.len());
        let mut batch = Batch::new();
        batch.add_tokens(0, a, &ids[a..b], |i| a + i + 1 < ids.len());
        let rows = engine.forward(&mut [&mut session], &batch.rows).map_err(|e| from_engine(&e))?;
        let reqs: Vec<RowRequest> = (a..b.min(ids.len() - 1)).map(|p| RowRequest { ids: &ids[p + 1..p + 2], top_k }).collect();
        let reds = engine.head_reduce(&rows, &reqs).map_err(|e| from_engine(&e))?;
        lps.extend(reds.iter().map(|r| {
            let ln_s = r.sum_exp.ln();
            let lp = |l: f32| lse_eval::stats::log_prob(l, r.max, ln_s);
            PromptLogprob { logprob: lp(r.picked[0]), top: r.top.iter().map(|&(id, l)| (id, lp(l))).collect() }
        }));
    }
    kept.put(Scored { ids: ids.to_vec(), top_k, lps: lps.clone(), session });
    Ok((lps, keep))
}
