//! llama-server's own answer form, shared by its `/completion` and `/infill` routes: `content`,
//! `tokens` (with `return_tokens`), `stop_type`, `tokens_evaluated`, the rendered `prompt`,
//! `stopping_word`, `timings`, `completion_probabilities` (with `n_probs`, `post_sampling_probs`); streamed as `{"content": .., "stop": false}` chunks
//! (each with its token ids), the stats last and no `[DONE]`.

use super::body::Fields;
use super::errors::{ApiError, ApiResult};
use super::generate::{self, Outcome};
use super::openai::piece;
use super::options::{cache_prompt, generate_request, max_tokens_or_room, stream_flags, validated};
use super::scheduler::{Event, Scheduler};
use super::sse;
use super::state::{AppState, Ready};
use axum::response::{IntoResponse, Response};
use axum::Json;
use lse_engine::generation::StepToken;
use lse_engine::{Engine, FinishReason, GenerateRequest, Prompt};
use serde_json::{json, Value};
use std::sync::Arc;

/// llama-server's sampling settings object of a request (`/props`' defaults, a `/completion`
/// answer's `generation_settings`, `/slots`' `params`); without a seed, llama.cpp's "draw one"
/// value (`LLAMA_DEFAULT_SEED`).
pub fn settings(req: &GenerateRequest) -> Value {
    let s = &req.sampling;
    json!({
        "n_predict": req.max_tokens,
        "seed": s.seed.unwrap_or(u32::MAX as u64),
        "temperature": s.temperature,
        "top_k": s.top_k,
        "top_p": s.top_p,
        "min_p": s.min_p,
        "repeat_penalty": s.repeat_penalty,
        "repeat_last_n": s.repeat_last_n,
        "presence_penalty": s.presence_penalty,
        "frequency_penalty": s.frequency_penalty,
        "stop": req.stop,
        "ignore_eos": req.ignore_eos,
        "n_probs": req.top_logprobs,
        "post_sampling_probs": req.post_sampling_probs,
    })
}

/// What the answer reports besides the text.
struct Shape {
    model: String,
    prompt: Vec<u32>,
    return_tokens: bool,
    n_probs: usize,
    /// `post_sampling_probs`: the probabilities after the sampler chain, as `prob` and `top_probs`.
    post_sampling: bool,
    /// `generation_settings`: what the request ran with.
    settings: Value,
}

impl Shape {
    fn tokens(&self, steps: &[StepToken]) -> Value {
        json!(if self.return_tokens { steps.iter().map(|s| s.id).collect() } else { Vec::new() })
    }

    /// llama-server's `completion_probabilities`: each step's token and its `n_probs` best, as
    /// log-probs under the model or (`post_sampling_probs`) probabilities after the sampler chain.
    fn probabilities(&self, engine: &Engine, steps: &[StepToken]) -> Value {
        let (value, list) = if self.post_sampling { ("prob", "top_probs") } else { ("logprob", "top_logprobs") };
        let entry = |id: u32, v: f64| {
            let text = piece(engine, id);
            json!({"id": id, "token": text, "bytes": engine.tokenizer().token_to_piece(id, true), value: v})
        };
        let rows: Vec<Value> = steps
            .iter()
            .map(|s| {
                let (v, top) = match (&s.post_sampling, self.post_sampling) {
                    (Some(p), true) => (p.prob, &p.top),
                    _ => (s.logprob, &s.top),
                };
                let mut e = entry(s.id, v);
                e[list] = json!(top.iter().map(|&(id, v)| entry(id, v)).collect::<Vec<_>>());
                e
            })
            .collect();
        json!(rows)
    }

    /// The whole answer (or a stream's last chunk, with the text already sent; `has_new_line`:
    /// the text held a line break).
    fn last(&self, engine: &Engine, o: &Outcome, has_new_line: bool) -> Value {
        let e = &o.end;
        let stop_type = match (e.finish, &e.stop_word) {
            (Some(FinishReason::Stop), Some(_)) => "word",
            // a constrained value's end: llama-server's grammar leaves the end of text only
            (Some(FinishReason::Eos | FinishReason::Stop), _) => "eos",
            (Some(FinishReason::Length) | None, _) => "limit",
        };
        let prompt = String::from_utf8_lossy(&engine.tokenizer().detokenize(&self.prompt, false, true)).into_owned();
        let mut v = json!({
            "index": 0,
            "content": o.text,
            "tokens": self.tokens(&o.steps),
            "stop": true,
            "model": self.model,
            "tokens_predicted": e.completion_tokens,
            "tokens_evaluated": e.prompt_tokens,
            "tokens_cached": e.prompt_tokens + e.completion_tokens.saturating_sub(1),
            "prompt": prompt,
            "has_new_line": has_new_line,
            "truncated": false,
            "stop_type": stop_type,
            "stopping_word": e.stop_word.as_deref().unwrap_or(""),
            "generation_settings": self.settings,
            "timings": e.timings(),
        });
        if self.n_probs > 0 {
            v["completion_probabilities"] = self.probabilities(engine, &o.steps);
        }
        v
    }
}

/// The most alternatives (`n_probs` × tokens) one answer holds, ~16 bytes each in memory and
/// several times that as JSON: a whole vocabulary for every step of a long answer would not fit.
const MAX_PROB_ENTRIES: u64 = 1 << 24;

/// Generates after the prompt `ids` with the body's options (`n_predict`, samplers, `n_probs`,
/// `return_tokens`, `stream`, `cache_prompt`) and answers in llama-server's form.
pub async fn respond(app: &AppState, ready: &Ready, f: &Fields<'_>, ids: Vec<u32>) -> ApiResult<Response> {
    const MAX_KEYS: [&str; 2] = ["n_predict", "max_tokens"];
    let mut base = generate_request(f, &MAX_KEYS, -1)?;
    // llama-server samples greedily at any temperature up to 0 (OpenAI's routes refuse < 0)
    base.sampling.temperature = base.sampling.temperature.max(0.0);
    let max_tokens = max_tokens_or_room(f, &MAX_KEYS, base.max_tokens, ids.len(), ready.engine.kv_capacity())?;
    // as llama-server: any count, at most the vocabulary's
    let asked = f.u64("n_probs")?.unwrap_or(0);
    let n_probs = asked.min(ready.engine.n_vocab() as u64) as usize;
    if (n_probs as u64).saturating_mul(max_tokens.max(0) as u64) > MAX_PROB_ENTRIES {
        return Err(ApiError::bad_request(format!(
            "\"n_probs\" × \"n_predict\" must be at most {MAX_PROB_ENTRIES} (the alternatives one answer holds), got {n_probs} × {max_tokens}"
        )));
    }
    let post_sampling = f.bool("post_sampling_probs")?.unwrap_or(false);
    let req = validated(GenerateRequest { prompt: Prompt::Tokens(ids.clone()), max_tokens, top_logprobs: n_probs, post_sampling_probs: post_sampling, ..base })?;
    let return_tokens = f.bool("return_tokens")?.unwrap_or(false);
    let mut settings = settings(&req);
    settings["n_probs"] = json!(asked);
    let shape = Shape { model: app.model_id(), prompt: ids, return_tokens, n_probs, post_sampling, settings };
    let (stream, _) = stream_flags(f)?;
    answer(&ready.scheduler, &ready.engine, shape, req, stream, cache_prompt(f)?).await
}

/// Runs `req` (its prompt `shape.prompt`) and answers in llama-server's form, whole or streamed.
async fn answer(sched: &Scheduler, engine: &Arc<Engine>, shape: Shape, req: GenerateRequest, stream: bool, cache_prompt: bool) -> ApiResult<Response> {
    let rx = generate::start(sched, vec![(0, req)], cache_prompt)?;
    if !stream {
        let outs = generate::collect(rx, 1).await?;
        return Ok(Json(shape.last(engine, &outs[0], outs[0].text.contains('\n'))).into_response());
    }
    let mut events = generate::Events::open(rx).await?;
    let (resp, out) = sse::channel();
    let engine = engine.clone();
    tokio::spawn(async move {
        let (mut predicted, mut has_new_line) = (0, false);
        while let Some(ev) = events.next().await {
            let v = match ev {
                Event::Delta { text, steps, .. } => {
                    predicted += steps.len();
                    has_new_line |= text.contains('\n');
                    // llama-server's chunks carry their ids whether or not `return_tokens` is set
                    let ids: Vec<u32> = steps.iter().map(|s| s.id).collect();
                    let mut v = json!({"index": 0, "content": text, "tokens": ids, "stop": false,
                                       "tokens_predicted": predicted, "tokens_evaluated": shape.prompt.len()});
                    if shape.n_probs > 0 {
                        v["completion_probabilities"] = shape.probabilities(&engine, &steps);
                    }
                    v
                }
                Event::Done { end, .. } => {
                    let o = Outcome { end, ..Default::default() };
                    // llama-server's stream ends with the stats and no `[DONE]`
                    let _ = out.json(&shape.last(&engine, &o, has_new_line)).await;
                    return;
                }
                Event::Error { error, .. } => {
                    let _ = out.json(&error.body()).await;
                    return;
                }
            };
            if !out.json(&v).await {
                return;
            }
        }
    });
    Ok(resp)
}
