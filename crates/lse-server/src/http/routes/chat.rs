//! `POST /v1/chat/completions`: messages rendered with the GGUF's chat template, `n` choices, a
//! forced tool call answered as `tool_calls` (see `tools`).

use crate::http::body::{wrong, Fields, JsonObject};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::generate::{self, finish_name, Outcome};
use crate::http::openai::{now_secs, piece, response_id, usage_of};
use crate::http::options::{cache_prompt, choices, for_choice, generate_request, stream_flags, validated};
use crate::http::scheduler::Event;
use crate::http::sse;
use crate::http::state::{AppState, Ready};
use crate::http::template;
use crate::http::tools;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lse_engine::generation::StepToken;
use lse_engine::{Engine, GenerateRequest, Prompt};
use serde_json::{json, Value};
use std::sync::atomic::Ordering::Relaxed;

pub async fn chat(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    app.metrics.requests.fetch_add(1, Relaxed);
    match run(&app, &body).await {
        Ok(r) => r,
        Err(e) => {
            app.metrics.requests_failed.fetch_add(1, Relaxed);
            e.into_response()
        }
    }
}

/// Message contents as the templates expect them: a string (text parts joined).
fn normalise(messages: &Value) -> ApiResult<Value> {
    let arr = messages.as_array().ok_or_else(|| wrong("messages", "a list of message objects"))?;
    if arr.is_empty() {
        return Err(ApiError::bad_request("\"messages\" is empty"));
    }
    let mut out = Vec::with_capacity(arr.len());
    for (i, m) in arr.iter().enumerate() {
        let mut o = m.as_object().cloned().ok_or_else(|| ApiError::bad_request(format!("\"messages\"[{i}] is not an object")))?;
        match o.get("role") {
            Some(Value::String(_)) => {}
            _ => return Err(ApiError::bad_request(format!("\"messages\"[{i}].role must be a string"))),
        }
        if let Some(Value::Array(parts)) = o.get("content") {
            let mut text = String::new();
            for p in parts {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    _ => return Err(ApiError::bad_request(format!("\"messages\"[{i}].content: only text parts are supported"))),
                }
            }
            o.insert("content".into(), Value::String(text));
        }
        match o.get("content") {
            None | Some(Value::Null) | Some(Value::String(_)) => {}
            _ => return Err(ApiError::bad_request(format!("\"messages\"[{i}].content must be a string or a list of text parts"))),
        }
        out.push(Value::Object(o));
    }
    Ok(Value::Array(out))
}

fn token_text(engine: &Engine, id: Option<u32>) -> String {
    id.map(|t| piece(engine, t)).unwrap_or_default()
}

/// Renders and tokenizes the chat prompt (`tools` shown to templates that show them).
pub fn prompt_ids(ready: &Ready, messages: &Value, tools: Option<&Value>) -> ApiResult<Vec<u32>> {
    let tmpl = &ready.chat_template;
    let e = &ready.engine;
    let tk = e.tokenizer();
    let bos = token_text(e, tk.bos_id());
    let eos = token_text(e, tk.eos_id());
    let mut text = template::render(tmpl, &normalise(messages)?, tools, &bos, &eos, true)?;
    // the template writes BOS itself when it wants one; tokenizing would add a second
    if tk.add_bos() && !bos.is_empty() && text.starts_with(&bos) {
        text.drain(..bos.len());
    }
    Ok(tk.tokenize(&text, true, true))
}

fn logprobs_content(engine: &Engine, steps: &[StepToken]) -> Value {
    let item = |id: u32, lp: f64| {
        let p = piece(engine, id);
        json!({"token": p, "logprob": lp, "bytes": p.as_bytes()})
    };
    Value::Array(
        steps
            .iter()
            .map(|s| {
                let mut v = item(s.id, s.logprob);
                v["top_logprobs"] = Value::Array(s.top.iter().map(|&(id, lp)| item(id, lp)).collect());
                v
            })
            .collect(),
    )
}

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    let mut base = generate_request(&f, &["max_completion_tokens", "max_tokens", "n_predict"], -1)?;
    let tool = tools::forced(&f)?;
    if let Some(t) = &tool {
        if base.json_object || base.json_schema.is_some() {
            return Err(ApiError::bad_request("a forced tool call and \"response_format\" exclude each other (the call's arguments follow the function's parameters)"));
        }
        base.json_schema = Some(t.parameters.clone());
    }
    let want_logprobs = f.bool("logprobs")?.unwrap_or(false);
    let top = f.u64("top_logprobs")?.unwrap_or(0) as usize;
    let (stream, include_usage) = stream_flags(&f)?;
    let messages = f.get("messages").ok_or_else(|| ApiError::bad_request("\"messages\" is required"))?;
    let ids = prompt_ids(ready, messages, tool.as_ref().map(|t| &t.tools))?;
    let cap = ready.engine.kv_capacity();
    if ids.len() >= cap {
        return Err(ApiError::bad_request(format!("the prompt has {} tokens; the context holds {cap} (--kv-len), leaving no room to generate", ids.len())));
    }
    // no max_tokens: until the context is full (llama-server's -1)
    let max_tokens = if base.max_tokens < 0 && f.get("max_tokens").is_none() && f.get("max_completion_tokens").is_none() && f.get("n_predict").is_none() {
        (cap - ids.len()) as i64
    } else {
        base.max_tokens
    };
    let req = validated(GenerateRequest { prompt: Prompt::Tokens(ids), max_tokens, top_logprobs: if want_logprobs { top } else { 0 }, ..base })?;
    let model = app.model_id();
    let id = response_id("chatcmpl");
    let created = now_secs();
    let n = choices(&f)?;
    let mut rx = generate::start(&ready.scheduler, (0..n).map(|j| (j, for_choice(&req, j))).collect(), cache_prompt(&f)?)?;
    let call_id = |j: usize| format!("call_{}_{j}", id.trim_start_matches("chatcmpl-"));
    if !stream {
        let outs = generate::collect(rx, n).await?;
        let choices: Vec<Value> = outs
            .iter()
            .enumerate()
            .map(|(j, o)| {
                let lp = want_logprobs.then(|| json!({"content": logprobs_content(&ready.engine, &o.steps)}));
                let message = match &tool {
                    None => json!({"role": "assistant", "content": o.text}),
                    Some(t) => json!({"role": "assistant", "content": null, "tool_calls": [tools::call(&call_id(j), &t.name, &o.text)]}),
                };
                json!({"index": j, "message": message, "logprobs": lp, "finish_reason": finish_name(o.finish)})
            })
            .collect();
        return Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": choices,
            "usage": usage_of(&outs, n),
        }))
        .into_response());
    }
    let first = match rx.recv().await {
        Some(Event::Error { error, .. }) => return Err(error),
        None => return Err(ApiError::internal("the scheduler dropped the request")),
        Some(ev) => ev,
    };
    let (resp, out) = sse::channel();
    let engine = ready.engine.clone();
    let opening = |j: usize| match &tool {
        None => json!({"role": "assistant", "content": ""}),
        Some(t) => {
            let mut call = tools::call(&call_id(j), &t.name, "");
            call["index"] = json!(0);
            json!({"role": "assistant", "content": null, "tool_calls": [call]})
        }
    };
    let openings: Vec<Value> = (0..n).map(opening).collect();
    // the text of a delta: content, or the forced call's arguments (the call itself goes first)
    let delta = move |text: String| match &tool {
        None => json!({"content": text}),
        Some(_) => json!({"tool_calls": [{"index": 0, "function": {"arguments": text}}]}),
    };
    tokio::spawn(async move {
        let chunk = |index: usize, delta: Value, lp: Value, finish: Value| {
            json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [{"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}]})
        };
        for (j, o) in openings.into_iter().enumerate() {
            if !out.json(&chunk(j, o, Value::Null, Value::Null)).await {
                return;
            }
        }
        let mut next = Some(first);
        let mut outs: Vec<Outcome> = (0..n).map(|_| Outcome::default()).collect();
        let mut left = n;
        while left > 0 {
            let ev = match next.take() {
                Some(e) => e,
                None => match rx.recv().await {
                    Some(e) => e,
                    None => break,
                },
            };
            let v = match ev {
                Event::Delta { index, text, steps } => {
                    let lp = if want_logprobs { json!({"content": logprobs_content(&engine, &steps)}) } else { Value::Null };
                    chunk(index, delta(text), lp, Value::Null)
                }
                Event::Done { index, finish, prompt_tokens, cached_tokens, completion_tokens } => {
                    left -= 1;
                    outs[index] = Outcome { prompt_tokens, cached_tokens, completion_tokens, ..Default::default() };
                    chunk(index, json!({}), Value::Null, json!(finish_name(Some(finish))))
                }
                Event::Error { error, .. } => {
                    let _ = out.json(&error.body()).await;
                    break;
                }
            };
            if !out.json(&v).await {
                return;
            }
        }
        if include_usage {
            let u = json!({"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "choices": [], "usage": usage_of(&outs, n)});
            let _ = out.json(&u).await;
        }
        out.done().await;
    });
    Ok(resp)
}
