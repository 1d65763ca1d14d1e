//! The generation report every front end prints or returns (`"object": "lse.generation"`).

use super::request::GenerateRequest;
use super::sequence::Sequence;
use crate::{Engine, EngineError};
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct GenerationReport {
    pub object: &'static str,
    pub prompt_tokens: usize,
    pub ids: Vec<u32>,
    pub text: String,
    pub finish_reason: &'static str,
    /// The chosen token's log-prob per step (nats, the model's distribution).
    pub logprobs: Vec<f64>,
    /// Per step, the two most likely tokens' log-prob gap (nats).
    pub top2_margin: Vec<f64>,
    /// Per step, the most likely tokens and their log-probs (when asked for).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_logprobs: Option<Vec<Vec<(u32, f64)>>>,
    /// With `post_sampling_probs` and `top_logprobs`, per step: the chosen token's probability
    /// after the sampler chain, and the most likely candidates the chain kept with theirs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled_probs: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_probs: Option<Vec<Vec<(u32, f64)>>>,
    pub prompt_seconds: f64,
    pub decode_seconds: f64,
    pub decode_tokens_per_second: f64,
}

impl GenerationReport {
    /// The report of a finished sequence (`finish()` is called on its text).
    pub fn from_sequence(s: &mut Sequence, req: &GenerateRequest, ended: Instant) -> GenerationReport {
        let (want_top, post) = (req.top_logprobs > 0, req.post_sampling_probs);
        s.text.finish();
        let first = s.first_token_at.unwrap_or(ended);
        let prompt_seconds = first.duration_since(s.started).as_secs_f64();
        let decode_seconds = ended.duration_since(first).as_secs_f64();
        // the first token comes out of the prompt pass; the others are decode steps
        let decoded = s.steps.len().saturating_sub(1);
        GenerationReport {
            object: "lse.generation",
            prompt_tokens: s.prompt().len(),
            ids: s.ids(),
            text: s.text.text().to_string(),
            finish_reason: s.finish.map_or("length", |f| f.name()),
            logprobs: s.steps.iter().map(|t| t.logprob).collect(),
            top2_margin: s.steps.iter().map(|t| t.top2_margin).collect(),
            top_logprobs: want_top.then(|| s.steps.iter().map(|t| t.top.clone()).collect()),
            sampled_probs: (post && want_top).then(|| s.steps.iter().map(|t| t.post_sampling.as_ref().map_or(0.0, |p| p.prob)).collect()),
            top_probs: (post && want_top).then(|| s.steps.iter().map(|t| t.post_sampling.as_ref().map_or_else(Vec::new, |p| p.top.clone())).collect()),
            prompt_seconds,
            decode_seconds,
            decode_tokens_per_second: if decode_seconds > 0.0 { decoded as f64 / decode_seconds } else { 0.0 },
        }
    }
}

impl Engine {
    /// Runs requests together (one batched forward per step) to the end; reports in order.
    pub fn generate_many(&self, reqs: &[GenerateRequest]) -> Result<Vec<GenerationReport>, EngineError> {
        let mut seqs = reqs.iter().map(|r| self.start_sequence(r)).collect::<Result<Vec<_>, _>>()?;
        let mut ended = vec![None; seqs.len()];
        while seqs.iter().any(|s| !s.is_done()) {
            let mut refs: Vec<&mut Sequence> = seqs.iter_mut().collect();
            self.step(&mut refs, self.options().batch_size)?;
            for (e, s) in ended.iter_mut().zip(&seqs) {
                if s.is_done() && e.is_none() {
                    *e = Some(Instant::now());
                }
            }
        }
        Ok(seqs
            .iter_mut()
            .zip(reqs)
            .zip(ended)
            .map(|((s, r), e)| GenerationReport::from_sequence(s, r, e.unwrap_or_else(Instant::now)))
            .collect())
    }

    /// One request to the end.
    pub fn generate(&self, req: &GenerateRequest) -> Result<GenerationReport, EngineError> {
        Ok(self.generate_many(std::slice::from_ref(req))?.remove(0))
    }
}
