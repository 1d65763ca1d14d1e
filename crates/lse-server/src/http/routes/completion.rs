//! `POST /completion`: llama-server's own completion endpoint (the one its clients and examples
//! call): a `prompt` string (special tokens added as the vocabulary asks, special-token text
//! parsed) or token ids, `n_predict` and the samplers, answered in that server's form (`native`).

use crate::http::body::{Fields, JsonObject};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::native;
use crate::http::prompts;
use crate::http::state::AppState;
use axum::extract::State;
use axum::response::Response;
use serde_json::Value;

pub async fn completion(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, run(&app, &body)).await
}

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    let mut prompts = prompts::parse(&ready.engine, "prompt", f.get("prompt"), None)?;
    if prompts.len() != 1 {
        return Err(ApiError::bad_request("\"prompt\" must be one prompt here (a string or token ids); /v1/completions takes several"));
    }
    native::respond(app, ready, &f, prompts.remove(0).ids).await
}
