//! `POST /v1/completions`: `n` choices per prompt (index `prompt · n + choice`); `echo` + `logprobs` give prompt log-probs
//! through the scoring path (what lm-eval's `local-completions` asks for log-likelihoods); a
//! `suffix` fills the gap between prompt and suffix (models with FIM tokens).

use crate::http::body::{Fields, JsonObject};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::generate::{self, finish_name, End, Outcome};
use crate::http::openai::{now_secs, response_id, add_timings, usage_of, LogprobsObject, TextCursor};
use crate::http::options::{cache_prompt, choices, for_choice, generate_request, prompt_fits, stream_flags, validated, DEFAULT_MAX_TOKENS};
use crate::http::prompts::{self, PromptIn};
use crate::http::scheduler::Event;
use crate::http::scoring::PromptLogprob;
use crate::http::sse;
use crate::http::state::{AppState, Ready};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use lse_engine::{GenerateRequest, Prompt};
use serde_json::{json, Value};

pub async fn completions(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, run(&app, &body)).await
}

struct Plan {
    prompts: Vec<PromptIn>,
    reqs: Vec<(usize, GenerateRequest)>,
    echo: bool,
    logprobs: Option<usize>,
    max_tokens: i64,
    cache_prompt: bool,
    /// Choices per prompt.
    n: usize,
    model: String,
}

impl Plan {
    /// Every choice's counts before it generates: its prompt's tokens, and those the scoring path
    /// found kept (`scored_cached`, per prompt).
    fn prompt_only(&self, scored_cached: &[usize]) -> Vec<Outcome> {
        let n = self.n;
        (0..self.prompts.len() * n).map(|k| {
            let end = End { prompt_tokens: self.prompts[k / n].ids.len(), cached_tokens: scored_cached[k / n], ..Default::default() };
            Outcome { end, ..Default::default() }
        }).collect()
    }
}

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    let base = generate_request(&f, &["max_tokens", "n_predict"], DEFAULT_MAX_TOKENS)?;
    crate::http::options::refuse_post_sampling_probs(&f)?;
    if !matches!(crate::http::tools::of(&f)?, crate::http::tools::Tools::None) {
        return Err(ApiError::bad_request("tool calls are answered on /v1/chat/completions"));
    }
    let echo = f.bool("echo")?.unwrap_or(false);
    let logprobs = match f.get("logprobs") {
        Some(Value::Bool(b)) => b.then_some(1),
        _ => f.u64("logprobs")?.map(|n| crate::http::options::openai_top_logprobs("logprobs", n as usize)).transpose()?,
    };
    let (stream, include_usage) = stream_flags(&f)?;
    let suffix = f.str("suffix")?.filter(|s| !s.is_empty());
    if suffix.is_some() && echo {
        return Err(ApiError::bad_request("\"echo\" and \"suffix\" exclude each other (the prompt is laid out around the gap)"));
    }
    let prompts = prompts::parse(&ready.engine, "prompt", f.get("prompt"), suffix)?;
    let n = choices(&f)?;
    // every prompt × choice is one job of the scheduler's queue: more than it holds never fits
    if prompts.len() * n > crate::http::QUEUE {
        return Err(ApiError::bad_request(format!(
            "{} prompts × n {n} are more sequences than one request may ask for ({})",
            prompts.len(),
            crate::http::QUEUE
        )));
    }
    let max_tokens = base.max_tokens;
    let mut reqs = Vec::with_capacity(prompts.len());
    for (i, p) in prompts.iter().enumerate() {
        let r = GenerateRequest { prompt: Prompt::Tokens(p.ids.clone()), top_logprobs: logprobs.unwrap_or(0), ..base.clone() };
        let r = validated(r)?;
        prompt_fits(p.ids.len(), ready.engine.kv_capacity(), max_tokens > 0).map_err(|mut e| {
            if prompts.len() > 1 {
                e.message = format!("prompt {i}: {}", e.message);
            }
            e
        })?;
        reqs.extend((0..n).map(|j| (i * n + j, for_choice(&r, j))));
    }
    let plan = Plan { prompts, reqs, echo, logprobs, max_tokens, cache_prompt: cache_prompt(&f)?, n, model: app.model_id() };
    // prompt log-probs first (the scoring path), then the generations
    let mut prompt_lps: Vec<Vec<PromptLogprob>> = vec![Vec::new(); plan.prompts.len()];
    // prompt tokens the scoring path found kept (reported when nothing is generated)
    let mut scored_cached = vec![0; plan.prompts.len()];
    if echo && logprobs.is_some() {
        for (i, p) in plan.prompts.iter().enumerate() {
            (prompt_lps[i], scored_cached[i]) = generate::prompt_logprobs(&ready.scheduler, p.ids.clone(), logprobs.unwrap_or(0), plan.cache_prompt).await?;
        }
    }
    if stream {
        return stream_response(ready, plan, prompt_lps, scored_cached, include_usage).await;
    }
    let outs = if max_tokens > 0 {
        let rx = generate::start(&ready.scheduler, plan.reqs.clone(), plan.cache_prompt)?;
        generate::collect(rx, plan.reqs.len()).await?
    } else {
        plan.prompt_only(&scored_cached)
    };
    let choices: Vec<Value> = outs
        .iter()
        .enumerate()
        .map(|(k, o)| {
            let i = k / n;
            let p = &plan.prompts[i];
            let mut text = if plan.echo { p.text.clone() } else { String::new() };
            let lp = plan.logprobs.map(|_| {
                let mut l = LogprobsObject::default();
                if plan.echo {
                    l.prompt(&ready.engine, &p.ids, &text, &prompt_lps[i]);
                }
                l.steps(&ready.engine, &o.steps);
                l.json()
            });
            text.push_str(&o.text);
            json!({"text": text, "index": k, "logprobs": lp, "finish_reason": finish_name(o.end.finish)})
        })
        .collect();
    let mut v = json!({
        "id": response_id("cmpl"),
        "object": "text_completion",
        "created": now_secs(),
        "model": plan.model,
        "choices": choices,
        "usage": usage_of(&outs, n),
    });
    add_timings(&mut v, &outs);
    Ok(Json(v).into_response())
}

fn chunk(id: &str, model: &str, created: u64, choice: Value) -> Value {
    json!({"id": id, "object": "text_completion", "created": created, "model": model, "choices": [choice]})
}

async fn stream_response(ready: &Ready, plan: Plan, prompt_lps: Vec<Vec<PromptLogprob>>, scored_cached: Vec<usize>, include_usage: bool) -> ApiResult<Response> {
    let (n, total) = (plan.n, plan.prompts.len() * plan.n);
    let events = match plan.max_tokens > 0 {
        true => Some(generate::Events::open(generate::start(&ready.scheduler, plan.reqs.clone(), plan.cache_prompt)?).await?),
        false => None,
    };
    let (resp, out) = sse::channel();
    let engine = ready.engine.clone();
    tokio::spawn(async move {
        let id = response_id("cmpl");
        let created = now_secs();
        let m = plan.model.as_str();
        // each choice's next text offset
        let mut cursors = vec![TextCursor::default(); total];
        // every choice's counts, for the usage chunk
        let mut outs = plan.prompt_only(&scored_cached);
        if plan.echo {
            for (k, cursor) in cursors.iter_mut().enumerate() {
                let (i, p) = (k / n, &plan.prompts[k / n]);
                let lp = plan.logprobs.map(|_| {
                    let mut l = LogprobsObject::default();
                    l.prompt(&engine, &p.ids, &p.text, &prompt_lps[i]);
                    l.json()
                });
                *cursor = TextCursor::at(p.text.chars().count());
                if !out.json(&chunk(&id, m, created, json!({"text": p.text, "index": k, "logprobs": lp, "finish_reason": null}))).await {
                    return;
                }
            }
        }
        let usage_chunk = |outs: &[Outcome]| json!({"id": id, "object": "text_completion", "created": created, "model": m, "choices": [], "usage": usage_of(outs, n)});
        let Some(mut events) = events else {
            for k in 0..total {
                let _ = out.json(&chunk(&id, m, created, json!({"text": "", "index": k, "logprobs": null, "finish_reason": "length"}))).await;
            }
            if include_usage {
                let _ = out.json(&usage_chunk(&outs)).await;
            }
            out.done().await;
            return;
        };
        let mut left = total;
        while left > 0 {
            let Some(ev) = events.next().await else { break };
            let v = match ev {
                Event::Delta { index, text, steps } => {
                    let lp = plan.logprobs.map(|_| {
                        let mut l = LogprobsObject::at(std::mem::take(&mut cursors[index]));
                        l.steps(&engine, &steps);
                        cursors[index] = l.cursor();
                        l.json()
                    });
                    chunk(&id, m, created, json!({"text": text, "index": index, "logprobs": lp, "finish_reason": null}))
                }
                Event::Done { index, end } => {
                    left -= 1;
                    let finish = finish_name(end.finish);
                    outs[index] = Outcome { end, ..Default::default() };
                    let mut c = chunk(&id, m, created, json!({"text": "", "index": index, "logprobs": null, "finish_reason": finish}));
                    add_timings(&mut c, &outs);
                    c
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
            let _ = out.json(&usage_chunk(&outs)).await;
        }
        out.done().await;
    });
    Ok(resp)
}
