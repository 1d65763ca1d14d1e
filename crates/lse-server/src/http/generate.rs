//! Running generations for a route: submit one job per prompt, then either wait for all of them
//! (a JSON answer) or hand the events on as they come (SSE).

use super::errors::{ApiError, ApiResult};
use super::scheduler::{Event, Job, Scheduler};
use super::scoring::PromptLogprob;
use lse_engine::generation::StepToken;
use lse_engine::{FinishReason, GenerateRequest};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// One finished generation.
#[derive(Debug, Default)]
pub struct Outcome {
    pub text: String,
    pub steps: Vec<StepToken>,
    pub end: End,
}

/// How a generation ended: why, its counts and times.
#[derive(Debug, Default, Clone)]
pub struct End {
    pub finish: Option<FinishReason>,
    pub prompt_tokens: usize,
    /// Prompt tokens found in a kept session (see `scheduler`).
    pub cached_tokens: usize,
    /// Every sampled token.
    pub completion_tokens: usize,
    /// The stop string that ended it (none when a constrained value closed it).
    pub stop_word: Option<String>,
    /// From its start in the running batch to its first token, and from there to its end.
    pub prompt_seconds: f64,
    pub predicted_seconds: f64,
}

impl End {
    /// llama-server's `timings` (its prompt count leaves out the kept tokens; rates of nothing are 0).
    pub fn timings(&self) -> Value {
        let prompt_n = self.prompt_tokens.saturating_sub(self.cached_tokens);
        let (prompt_ms, predicted_ms) = (self.prompt_seconds * 1e3, self.predicted_seconds * 1e3);
        let per_token = |ms: f64, n: usize| if n > 0 { ms / n as f64 } else { 0.0 };
        let per_second = |ms: f64, n: usize| if ms > 0.0 { 1e3 * n as f64 / ms } else { 0.0 };
        json!({
            "cache_n": self.cached_tokens,
            "prompt_n": prompt_n,
            "prompt_ms": prompt_ms,
            "prompt_per_token_ms": per_token(prompt_ms, prompt_n),
            "prompt_per_second": per_second(prompt_ms, prompt_n),
            "predicted_n": self.completion_tokens,
            "predicted_ms": predicted_ms,
            "predicted_per_token_ms": per_token(predicted_ms, self.completion_tokens),
            "predicted_per_second": per_second(predicted_ms, self.completion_tokens),
        })
    }
}

/// OpenAI's name for a finish reason.
pub fn finish_name(f: Option<FinishReason>) -> &'static str {
    match f {
        Some(FinishReason::Length) | None => "length",
        Some(FinishReason::Eos) | Some(FinishReason::Stop) => "stop",
    }
}

/// Submits the requests (index = position) and returns the stream of their events;
/// `cache_prompt`: each may start in a kept session that shares a prefix with its prompt.
pub fn start(sched: &Scheduler, reqs: Vec<(usize, GenerateRequest)>, cache_prompt: bool) -> ApiResult<mpsc::UnboundedReceiver<Event>> {
    let (tx, rx) = mpsc::unbounded_channel();
    for (index, req) in reqs {
        sched.submit(Job::Generate { index, req, cache_prompt, tx: tx.clone() })?;
    }
    Ok(rx)
}

/// A stream's events, once its first one has decided the HTTP status: an error before any output
/// is the request's error, not a 200 stream.
pub struct Events {
    first: Option<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
}

impl Events {
    /// Waits for the first event; an error there (or a dropped scheduler) is the request's.
    pub async fn open(mut rx: mpsc::UnboundedReceiver<Event>) -> ApiResult<Events> {
        match rx.recv().await {
            Some(Event::Error { error, .. }) => Err(error),
            None => Err(ApiError::internal("the scheduler dropped the request")),
            Some(ev) => Ok(Events { first: Some(ev), rx }),
        }
    }

    /// The next event (the first one again first); `None` when the scheduler is gone.
    pub async fn next(&mut self) -> Option<Event> {
        match self.first.take() {
            Some(e) => Some(e),
            None => self.rx.recv().await,
        }
    }
}

/// Waits for every generation of `rx` (`n` of them, indices `0..n`).
pub async fn collect(mut rx: mpsc::UnboundedReceiver<Event>, n: usize) -> ApiResult<Vec<Outcome>> {
    let mut out: Vec<Outcome> = (0..n).map(|_| Outcome::default()).collect();
    let mut left = n;
    while left > 0 {
        match rx.recv().await {
            Some(Event::Delta { index, text, steps }) => {
                let o = &mut out[index];
                o.text.push_str(&text);
                o.steps.extend(steps);
            }
            Some(Event::Done { index, end }) => {
                out[index].end = end;
                left -= 1;
            }
            Some(Event::Error { index, mut error }) => {
                if n > 1 {
                    error.message = format!("prompt {index}: {}", error.message);
                }
                return Err(error);
            }
            None => return Err(ApiError::internal("the scheduler dropped the request")),
        }
    }
    Ok(out)
}

/// Prompt log-probs through the scheduler's scoring path, and how many came from a kept prompt.
pub async fn prompt_logprobs(sched: &Scheduler, ids: Vec<u32>, top_k: usize, cache_prompt: bool) -> ApiResult<(Vec<PromptLogprob>, usize)> {
    sched.ask(|tx| Job::PromptLogprobs { ids, top_k, cache_prompt, tx }).await
}
