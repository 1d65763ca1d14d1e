//! `POST /v1/chat/completions`: messages rendered with the GGUF's chat template, `n` choices, tool
//! calls answered as `tool_calls` (see `tools`).

use crate::http::body::{wrong, Fields, JsonObject};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::generate::{self, finish_name, Outcome};
use crate::http::openai::{now_secs, piece, response_id, add_timings, usage_of};
use crate::http::options::{cache_prompt, choices, for_choice, generate_request, max_tokens_or_room, stream_flags, validated};
use crate::http::scheduler::Event;
use crate::http::sse;
use crate::http::state::{AppState, Ready};
use crate::http::tools::{self, Tools};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lse_engine::generation::StepToken;
use lse_engine::{Engine, GenerateRequest, Prompt};
use serde_json::{json, Value};

pub async fn chat(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, run(&app, &body)).await
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
        match o.get_mut("tool_calls") {
            None | Some(Value::Null) => {}
            // OpenAI's clients send a call's arguments as JSON text; templates write them out with
            // `tojson` (Qwen's, Hermes'), so they get the object, as vLLM passes them
            Some(Value::Array(calls)) => {
                for c in calls.iter_mut() {
                    if let Some(args) = c.get_mut("function").and_then(|g| g.get_mut("arguments")) {
                        if let Some(v) = args.as_str().and_then(|t| serde_json::from_str::<Value>(t).ok()).filter(Value::is_object) {
                            *args = v;
                        }
                    }
                }
            }
            _ => return Err(ApiError::bad_request(format!("\"messages\"[{i}].tool_calls must be a list of calls"))),
        }
        match o.get("content") {
            Some(Value::String(_)) => {}
            // an assistant turn that only calls tools (OpenAI's clients send null): empty text, which
            // templates that join the turn's parts with `+` can render (llama-server asks for
            // content on every other turn)
            None | Some(Value::Null) if o.get("tool_calls").is_some_and(|c| !c.is_null()) => {
                o.insert("content".into(), Value::String(String::new()));
            }
            None | Some(Value::Null) => {
                return Err(ApiError::bad_request(format!("\"messages\"[{i}].content is missing (it may be null only on a turn with tool_calls)")))
            }
            _ => return Err(ApiError::bad_request(format!("\"messages\"[{i}].content must be a string or a list of text parts"))),
        }
        out.push(Value::Object(o));
    }
    Ok(Value::Array(out))
}

fn token_text(engine: &Engine, id: Option<u32>) -> String {
    id.map(|t| piece(engine, t)).unwrap_or_default()
}

/// A chat prompt: the text, the assistant's words it ends with (a continued last turn's), and
/// whether the answer repeats them.
pub struct ChatPrompt {
    pub text: String,
    pub prefill: String,
    pub echo: bool,
}

/// The chat prompt as the template renders it (`tools` shown to templates that show them), with
/// the generation prompt (the assistant's turn opened). A last assistant turn is continued: the
/// turns before it rendered so, its text after the opened turn. By default as llama-server does,
/// the answer (and its stream) starting with that text; `continue_final_message: true` as vLLM
/// does, the answer the new text only; `false` closes the turn and opens another.
pub fn prompt_text(ready: &Ready, f: &Fields, messages: &Value, tools: Option<&Value>) -> ApiResult<ChatPrompt> {
    let e = &ready.engine;
    let tk = e.tokenizer();
    let mut messages = normalise(messages)?;
    let list = messages.as_array_mut().expect("normalise gives a list");
    let role = |m: Option<&Value>| m.and_then(|m| m["role"].as_str()).map(str::to_string);
    let asked = f.bool("continue_final_message")?;
    let mut prefill = String::new();
    if asked != Some(false) && role(list.last()).as_deref() == Some("assistant") {
        let last = list.pop().expect("a last message");
        if last.get("tool_calls").is_some_and(|c| c.as_array().is_some_and(|c| !c.is_empty())) {
            return Err(ApiError::bad_request("the last message, the assistant's, holds tool calls: it cannot be continued (send their results, or \"continue_final_message\": false)"));
        }
        if role(list.last()).as_deref() == Some("assistant") {
            return Err(ApiError::bad_request("two assistant messages end \"messages\": only the last one can be continued"));
        }
        prefill = last["content"].as_str().unwrap_or_default().to_string();
    }
    let mut text = ready.chat_template.render(&messages, tools, &token_text(e, tk.bos_id()), &token_text(e, tk.eos_id()), true)?;
    text.push_str(&prefill);
    Ok(ChatPrompt { text, prefill, echo: asked.is_none() })
}

/// The chat prompt's token ids.
fn prompt_ids(ready: &Ready, p: &ChatPrompt) -> Vec<u32> {
    let tk = ready.engine.tokenizer();
    let bos = token_text(&ready.engine, tk.bos_id());
    // the template writes BOS itself when it wants one; tokenizing would add a second
    let text = match p.text.strip_prefix(bos.as_str()) {
        Some(rest) if tk.add_bos() && !bos.is_empty() => rest,
        _ => &p.text,
    };
    tk.tokenize(text, true, true)
}

fn logprobs_content(engine: &Engine, steps: &[StepToken]) -> Value {
    // `bytes`: the token's own bytes, part of a character's included (the text shows U+FFFD)
    let item = |id: u32, lp: f64| json!({"token": piece(engine, id), "logprob": lp, "bytes": engine.tokenizer().piece(id, true)});
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

/// The finish reason of an answer not read for calls: "tool_calls" for a call "required" forced
/// (as the calls "required" reads out of an answer), else the generation's.
fn unread_finish(required: bool, finish: Option<lse_engine::FinishReason>) -> Value {
    if required {
        json!("tool_calls")
    } else {
        json!(finish_name(finish))
    }
}

/// How a choice's answer becomes tool calls: the calls' ids, the function a forced call names,
/// and the functions "auto" tools offer.
struct Calls {
    prefix: String,
    forced: Option<String>,
    /// The forced call answers "required" (see `Tools::Forced`).
    required: bool,
    names: Option<Vec<String>>,
}

impl Calls {
    fn id(&self, choice: usize, k: usize) -> String {
        format!("{}_{choice}_{k}", self.prefix)
    }


    /// An answer's message fields and finish reason: a forced call's arguments; with "auto"
    /// tools, the calls read out of it and the text around them ("tool_calls"); else its text.
    fn answer(&self, choice: usize, text: &str, finish: Option<lse_engine::FinishReason>) -> (Value, Value) {
        if let Some(name) = &self.forced {
            return (json!({"content": null, "tool_calls": [tools::call(&self.id(choice, 0), name, text.trim())]}), unread_finish(self.required, finish));
        }
        match self.names.as_deref().and_then(|names| tools::read_calls(text, names)) {
            Some((found, rest)) => {
                let found: Vec<Value> = found.iter().enumerate().map(|(k, (name, args))| tools::call(&self.id(choice, k), name, args)).collect();
                (json!({"content": if rest.is_empty() { Value::Null } else { json!(rest) }, "tool_calls": found}), json!("tool_calls"))
            }
            None => (json!({"content": text}), json!(finish_name(finish))),
        }
    }
}

/// `POST /apply-template` (llama-server's): the chat prompt a `messages` list (and `tools`) would
/// get, as text, without generating.
pub async fn apply_template(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult<Json<Value>> {
    let ready = app.ready()?;
    let f = Fields(&body);
    let messages = f.get("messages").ok_or_else(|| ApiError::bad_request("\"messages\" is required"))?;
    let tools = tools::of(&f)?;
    Ok(Json(json!({"prompt": prompt_text(ready, &f, messages, tools.for_template())?.text})))
}

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    const MAX_KEYS: [&str; 3] = ["max_completion_tokens", "max_tokens", "n_predict"];
    let mut base = generate_request(&f, &MAX_KEYS, -1)?;
    crate::http::options::refuse_post_sampling_probs(&f)?;
    let tools = tools::of(&f)?;
    if let Tools::Forced { parameters: schema, .. } | Tools::Auto { required: Some(schema), .. } = &tools {
        if base.json_object || base.json_schema.is_some() {
            return Err(ApiError::bad_request("a required tool call and \"response_format\" exclude each other (the call follows the function's parameters)"));
        }
        base.json_schema = Some(schema.clone());
    }
    let want_logprobs = f.bool("logprobs")?.unwrap_or(false);
    let top = crate::http::options::openai_top_logprobs("top_logprobs", f.u64("top_logprobs")?.unwrap_or(0) as usize)?;
    if top > 0 && !want_logprobs {
        // as OpenAI answers
        return Err(ApiError::bad_request("\"top_logprobs\" needs \"logprobs\": true"));
    }
    let (stream, include_usage) = stream_flags(&f)?;
    let messages = f.get("messages").ok_or_else(|| ApiError::bad_request("\"messages\" is required"))?;
    let chat_prompt = prompt_text(ready, &f, messages, tools.for_template())?;
    let ids = prompt_ids(ready, &chat_prompt);
    if !chat_prompt.prefill.is_empty() && matches!(tools, Tools::Forced { .. }) {
        return Err(ApiError::bad_request("a continued assistant message and a required tool call exclude each other (the call would start a new turn)"));
    }
    // the continued text is the start of a JSON answer: the constraint reads it first
    base.value_prefix = chat_prompt.prefill.clone();
    // what the answer starts with (llama-server's continuation; vLLM's answers the new text only)
    let prefill = if chat_prompt.echo { chat_prompt.prefill } else { String::new() };
    let max_tokens = max_tokens_or_room(&f, &MAX_KEYS, base.max_tokens, ids.len(), ready.engine.kv_capacity())?;
    let req = validated(GenerateRequest { prompt: Prompt::Tokens(ids), max_tokens, top_logprobs: if want_logprobs { top } else { 0 }, ..base })?;
    let model = app.model_id();
    let id = response_id("chatcmpl");
    let created = now_secs();
    let n = choices(&f)?;
    let rx = generate::start(&ready.scheduler, (0..n).map(|j| (j, for_choice(&req, j))).collect(), cache_prompt(&f)?)?;
    let (forced, names) = match &tools {
        Tools::Forced { name, .. } => (Some(name.clone()), None),
        Tools::Auto { names, .. } => (None, Some(names.clone())),
        Tools::None => (None, None),
    };
    let required = matches!(tools, Tools::Forced { required: true, .. });
    let calls = Calls { prefix: format!("call_{}", id.trim_start_matches("chatcmpl-")), forced, required, names };
    if !stream {
        let outs = generate::collect(rx, n).await?;
        let choices: Vec<Value> = outs
            .iter()
            .enumerate()
            .map(|(j, o)| {
                let lp = want_logprobs.then(|| json!({"content": logprobs_content(&ready.engine, &o.steps)}));
                let (mut message, finish) = calls.answer(j, &o.text, o.end.finish);
                // a continued turn's whole text, as llama-server answers
                if let (false, Some(text)) = (prefill.is_empty(), message["content"].as_str()) {
                    message["content"] = json!(format!("{prefill}{text}"));
                }
                message["role"] = json!("assistant");
                json!({"index": j, "message": message, "logprobs": lp, "finish_reason": finish})
            })
            .collect();
        let mut v = json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": choices,
            "usage": usage_of(&outs, n),
        });
        add_timings(&mut v, &outs);
        return Ok(Json(v).into_response());
    }
    let mut events = generate::Events::open(rx).await?;
    let (resp, out) = sse::channel();
    let engine = ready.engine.clone();
    let opening = |j: usize| match &tools {
        Tools::Forced { name, .. } => {
            let mut call = tools::call(&calls.id(j, 0), name, "");
            call["index"] = json!(0);
            json!({"role": "assistant", "content": null, "tool_calls": [call]})
        }
        // llama-server's stream starts a continued turn with its text
        _ => json!({"role": "assistant", "content": prefill}),
    };
    let openings: Vec<Value> = (0..n).map(opening).collect();
    // with "auto" tools, text goes out as it comes and what may be a call is held to the end
    let auto = matches!(tools, Tools::Auto { .. });
    // the text of a delta: content, or the forced call's arguments (the call itself goes first)
    let forced = calls.forced.is_some();
    let mut args: Vec<tools::ArgsStream> = (0..n).map(|_| Default::default()).collect();
    let mut delta = move |index: usize, text: String| {
        if forced {
            json!({"tool_calls": [{"index": 0, "function": {"arguments": args[index].push(&text)}}]})
        } else {
            json!({"content": text})
        }
    };
    let mut streams: Vec<Option<tools::CallStream>> = (0..n).map(|_| Some(Default::default())).collect();
    // the held rest's delta (calls with their index, or the text) and its finish reason
    let whole = move |j: usize, text: &str, finish| {
        let (mut d, finish) = calls.answer(j, text, finish);
        if let Some(calls) = d.get_mut("tool_calls").and_then(Value::as_array_mut) {
            calls.iter_mut().enumerate().for_each(|(k, c)| c["index"] = json!(k));
        }
        if d["content"].is_null() {
            d.as_object_mut().expect("an object").remove("content");
        }
        (d, finish)
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
        let mut outs: Vec<Outcome> = (0..n).map(|_| Outcome::default()).collect();
        let mut left = n;
        while left > 0 {
            let Some(ev) = events.next().await else { break };
            let vs = match ev {
                Event::Delta { index, text, steps } => {
                    let lp = if want_logprobs { json!({"content": logprobs_content(&engine, &steps)}) } else { Value::Null };
                    if let Some(s) = streams[index].as_mut().filter(|_| auto) {
                        let now = s.push(&text);
                        let d = if now.is_empty() { json!({}) } else { json!({"content": now}) };
                        if want_logprobs || d != json!({}) { vec![chunk(index, d, lp, Value::Null)] } else { vec![] }
                    } else {
                        vec![chunk(index, delta(index, text), lp, Value::Null)]
                    }
                }
                Event::Done { index, end } => {
                    left -= 1;
                    let finish = end.finish;
                    outs[index] = Outcome { end, ..Default::default() };
                    let (mut vs, mut last) = if let Some(s) = streams[index].take().filter(|_| auto) {
                        let (d, finish) = whole(index, &s.rest(), finish);
                        let last = chunk(index, json!({}), Value::Null, finish);
                        (if d == json!({"content": ""}) { vec![] } else { vec![chunk(index, d, Value::Null, Value::Null)] }, last)
                    } else {
                        (vec![], chunk(index, json!({}), Value::Null, unread_finish(required, finish)))
                    };
                    add_timings(&mut last, &outs);
                    vs.push(last);
                    vs
                }
                Event::Error { error, .. } => {
                    let _ = out.json(&error.body()).await;
                    break;
                }
            };
            for v in vs {
                if !out.json(&v).await {
                    return;
                }
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
