//! `POST /infill`: llama-server's fill-in-the-middle endpoint, the one editor plugins (llama.vim,
//! llama.vscode) call. `input_prefix` and `input_suffix` around the gap, optional `input_extra`
//! files and `prompt` (the start of the middle) are laid out by the engine as llama-server lays
//! them out; the answer comes in llama-server's own completion form (`content`, `tokens`,
//! `stop_type`, `completion_probabilities` for `n_probs`), streamed as its
//! `{"content": .., "stop": false}` chunks when `stream` is set.

use crate::http::body::{wrong, Fields, JsonObject};
use crate::http::errors::{from_engine, ApiError, ApiResult};
use crate::http::generate::{self, Outcome};
use crate::http::openai::piece;
use crate::http::options::{cache_prompt, generate_request, max_tokens_or_room, stream_flags, validated};
use crate::http::scheduler::Event;
use crate::http::sse;
use crate::http::state::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lse_engine::generation::StepToken;
use lse_engine::{Engine, FinishReason, GenerateRequest, Infill, InfillFile, Prompt};
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;

pub async fn infill(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    app.metrics.requests.fetch_add(1, Relaxed);
    match run(&app, &body).await {
        Ok(r) => r,
        Err(e) => {
            app.metrics.requests_failed.fetch_add(1, Relaxed);
            e.into_response()
        }
    }
}

/// `input_extra`: a list of `{"filename": .., "text": ..}` (the name defaults as llama-server's).
fn files(f: &Fields) -> ApiResult<Vec<InfillFile>> {
    let what = "a list of {\"filename\": string, \"text\": string}";
    let Some(v) = f.get("input_extra") else { return Ok(Vec::new()) };
    let list = v.as_array().ok_or_else(|| wrong("input_extra", what))?;
    list.iter()
        .map(|c| {
            let text = c.get("text").and_then(Value::as_str).ok_or_else(|| wrong("input_extra", what))?;
            let filename = match c.get("filename") {
                None => "tmp",
                Some(n) => n.as_str().ok_or_else(|| wrong("input_extra", what))?,
            };
            Ok(InfillFile { filename: filename.into(), text: text.into() })
        })
        .collect()
}

/// What the answer reports besides the text.
struct Shape {
    model: String,
    prompt: Vec<u32>,
    return_tokens: bool,
    n_probs: usize,
}

impl Shape {
    fn tokens(&self, steps: &[StepToken]) -> Value {
        json!(if self.return_tokens { steps.iter().map(|s| s.id).collect() } else { Vec::new() })
    }

    /// llama-server's `completion_probabilities`: each step's token and its `n_probs` best.
    fn probabilities(&self, engine: &Engine, steps: &[StepToken]) -> Value {
        let entry = |id: u32, lp: f64| {
            let text = piece(engine, id);
            json!({"id": id, "token": text, "bytes": engine.tokenizer().token_to_piece(id, true), "logprob": lp})
        };
        let rows: Vec<Value> = steps
            .iter()
            .map(|s| {
                let mut e = entry(s.id, s.logprob);
                e["top_logprobs"] = json!(s.top.iter().map(|&(id, lp)| entry(id, lp)).collect::<Vec<_>>());
                e
            })
            .collect();
        json!(rows)
    }

    /// The whole answer (or a stream's last chunk, with the text already sent).
    fn last(&self, engine: &Engine, o: &Outcome) -> Value {
        let stop_type = match o.finish {
            Some(FinishReason::Eos) => "eos",
            Some(FinishReason::Stop) => "word",
            Some(FinishReason::Length) | None => "limit",
        };
        let prompt = String::from_utf8_lossy(&engine.tokenizer().detokenize(&self.prompt, false, true)).into_owned();
        let mut v = json!({
            "index": 0,
            "content": o.text,
            "tokens": self.tokens(&o.steps),
            "stop": true,
            "model": self.model,
            "tokens_predicted": o.completion_tokens,
            "tokens_evaluated": o.prompt_tokens,
            "tokens_cached": o.prompt_tokens + o.completion_tokens.saturating_sub(1),
            "prompt": prompt,
            "truncated": false,
            "stop_type": stop_type,
        });
        if self.n_probs > 0 {
            v["completion_probabilities"] = self.probabilities(engine, &o.steps);
        }
        v
    }
}

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    let required = |k: &str| f.str(k)?.map(str::to_string).ok_or_else(|| ApiError::bad_request(format!("\"{k}\" is required")));
    let request = Infill { prefix: required("input_prefix")?, suffix: required("input_suffix")?, middle: f.str("prompt")?.unwrap_or("").into(), files: Some(files(&f)?) };
    let ids = ready.engine.infill_ids(&request).map_err(|e| from_engine(&e))?;
    const MAX_KEYS: [&str; 2] = ["n_predict", "max_tokens"];
    let base = generate_request(&f, &MAX_KEYS, -1)?;
    let max_tokens = max_tokens_or_room(&f, &MAX_KEYS, base.max_tokens, ids.len(), ready.engine.kv_capacity())?;
    let n_probs = f.u64("n_probs")?.unwrap_or(0) as usize;
    let req = validated(GenerateRequest { prompt: Prompt::Tokens(ids.clone()), max_tokens, top_logprobs: n_probs, ..base })?;
    let shape = Shape { model: app.model_id(), prompt: ids, return_tokens: f.bool("return_tokens")?.unwrap_or(false), n_probs };
    let (stream, _) = stream_flags(&f)?;
    let mut rx = generate::start(&ready.scheduler, vec![(0, req)], cache_prompt(&f)?)?;
    if !stream {
        let outs = generate::collect(rx, 1).await?;
        return Ok(Json(shape.last(&ready.engine, &outs[0])).into_response());
    }
    let first = match rx.recv().await {
        Some(Event::Error { error, .. }) => return Err(error),
        None => return Err(ApiError::internal("the scheduler dropped the request")),
        Some(ev) => ev,
    };
    let (resp, out) = sse::channel();
    let engine = ready.engine.clone();
    tokio::spawn(async move {
        let mut next = Some(first);
        let mut predicted = 0;
        loop {
            let ev = match next.take() {
                Some(e) => e,
                None => match rx.recv().await {
                    Some(e) => e,
                    None => return,
                },
            };
            let v = match ev {
                Event::Delta { text, steps, .. } => {
                    predicted += steps.len();
                    // llama-server's chunks carry their ids whether or not `return_tokens` is set
                    let ids: Vec<u32> = steps.iter().map(|s| s.id).collect();
                    let mut v = json!({"index": 0, "content": text, "tokens": ids, "stop": false,
                                       "tokens_predicted": predicted, "tokens_evaluated": shape.prompt.len()});
                    if shape.n_probs > 0 {
                        v["completion_probabilities"] = shape.probabilities(&engine, &steps);
                    }
                    v
                }
                Event::Done { finish, prompt_tokens, cached_tokens, completion_tokens, .. } => {
                    let o = Outcome { finish: Some(finish), prompt_tokens, cached_tokens, completion_tokens, ..Default::default() };
                    // llama-server's stream ends with the stats and no `[DONE]`
                    let _ = out.json(&shape.last(&engine, &o)).await;
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
