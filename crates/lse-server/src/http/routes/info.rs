//! `GET /health`, `GET /v1/models`, `GET /tokenizer_info`, `GET /props`, `GET /metrics`.

use crate::http::errors::{ApiError, ApiResult};
use crate::http::scheduler::Job;
use crate::http::openai::{now_secs, piece};
use crate::http::state::AppState;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use serde_json::{json, Value};

/// 503 while the model loads, then 200 `{"status": "ok"}`.
pub async fn health(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    app.ready()?;
    Ok(Json(json!({"status": "ok"})))
}

pub async fn models(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let e = &r.engine;
    Ok(Json(json!({
        "object": "list",
        "data": [{
            "id": r.model_id,
            "object": "model",
            "created": now_secs(),
            "owned_by": "lse",
            "meta": {
                "n_vocab": e.n_vocab(),
                "n_ctx": e.kv_capacity(),
                "n_embd": e.n_embd(),
                "architecture": e.architecture(),
                "name": e.model_name(),
            }
        }]
    })))
}

pub async fn tokenizer_info(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let e = &r.engine;
    let tk = e.tokenizer();
    let text = |id: Option<u32>| id.map_or(Value::Null, |t| json!(piece(e, t)));
    Ok(Json(json!({
        "eos_token": text(tk.eos_id()),
        "bos_token": text(tk.bos_id()),
        "pad_token": text(tk.pad_id()),
        "eos_token_id": tk.eos_id(),
        "bos_token_id": tk.bos_id(),
        "pad_token_id": tk.pad_id(),
        "add_bos_token": tk.add_bos(),
        "chat_template": r.chat_template.source(),
        "n_vocab": e.n_vocab(),
    })))
}

/// llama-server's `GET /props`: the defaults a request gets, the context, the slots, the model
/// and its chat template (what its web UI and clients read).
pub async fn props(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let e = &r.engine;
    let tk = e.tokenizer();
    let defaults = lse_engine::GenerateRequest { max_tokens: -1, ..Default::default() };
    let text = |id: Option<u32>| id.map_or(Value::Null, |t| json!(piece(e, t)));
    Ok(Json(json!({
        "default_generation_settings": {
            "n_ctx": e.kv_capacity(),
            "params": crate::http::native::settings(&defaults),
        },
        "total_slots": r.parallel,
        "model_alias": r.model_id,
        "model_path": app.model_file,
        "chat_template": r.chat_template.source(),
        "bos_token": text(tk.bos_id()),
        "eos_token": text(tk.eos_id()),
        "modalities": {"vision": false, "audio": false},
        "build_info": format!("lse-server {}", env!("CARGO_PKG_VERSION")),
    })))
}

pub async fn metrics(State(app): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.metrics.render())
}

/// llama-server's `GET /slots`: each `--parallel` slot, what it runs or ran last (see
/// `http::slots`); with `?fail_on_no_slot=1`, a 503 when every slot is busy (what load balancers
/// ask); a 501 under `--no-slots`, as there.
pub async fn slots(State(app): State<AppState>, Query(q): Query<std::collections::HashMap<String, String>>) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    if !r.slots_endpoint {
        return Err(ApiError::new(StatusCode::NOT_IMPLEMENTED, "This server does not support slots endpoint. Start it with `--slots`"));
    }
    let views = r.scheduler.ask(|tx| Job::Slots { tx }).await?;
    if views.iter().all(|v| v.processing) && q.get("fail_on_no_slot").is_some_and(|f| !f.is_empty()) {
        return Err(ApiError::unavailable("no slot available"));
    }
    Ok(Json(crate::http::slots::json(&r.engine, &views)))
}
