//! `POST /infill`: llama-server's fill-in-the-middle endpoint, the one editor plugins (llama.vim,
//! llama.vscode) call. `input_prefix` and `input_suffix` around the gap, optional `input_extra`
//! files and `prompt` (the start of the middle) are laid out by the engine as llama-server lays
//! them out; the answer is in that server's own form (`native`).

use crate::http::body::{wrong, Fields, JsonObject};
use crate::http::errors::{from_engine, ApiError, ApiResult};
use crate::http::native;
use crate::http::state::AppState;
use axum::extract::State;
use axum::response::Response;
use lse_engine::{Infill, InfillFile};
use serde_json::Value;

pub async fn infill(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, run(&app, &body)).await
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

async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Response> {
    let ready = app.ready()?;
    let f = Fields(body);
    let required = |k: &str| f.str(k)?.map(str::to_string).ok_or_else(|| ApiError::bad_request(format!("\"{k}\" is required")));
    let request = Infill { prefix: required("input_prefix")?, suffix: required("input_suffix")?, middle: f.str("prompt")?.unwrap_or("").into(), files: Some(files(&f)?) };
    let ids = ready.engine.infill_ids(&request).map_err(|e| from_engine(&e))?;
    native::respond(app, ready, &f, ids).await
}
