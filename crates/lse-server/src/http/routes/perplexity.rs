//! `POST /v1/perplexity`: the SPEC §7 request object (as the C API and Python take it) → the
//! SPEC §4 report, scored on the scheduler thread behind the generations in flight.

use crate::http::body::JsonObject;
use crate::http::errors::{from_eval, ApiError, ApiResult};
use crate::http::scheduler::Job;
use crate::http::state::AppState;
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use serde_json::Value;

pub async fn perplexity(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, run(&app, body)).await
}

async fn run(app: &AppState, body: serde_json::Map<String, Value>) -> ApiResult<Json<Value>> {
    let ready = app.ready()?;
    // file paths name the server's files: a client may neither write them nor probe them
    for (field, does) in [("kld_base_out", "writes"), ("shard", "writes"), ("shard_out", "writes"), ("kld_base", "reads")] {
        if body.get(field).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::bad_request(format!(
                "\"{field}\" {does} a file on the server and is not served over HTTP; use the CLI or the library"
            )));
        }
    }
    let req = lse_eval::PerplexityRequest::from_json(&Value::Object(body)).map_err(|e| from_eval(&e))?;
    let report = ready.scheduler.ask(|tx| Job::Perplexity { req, tx }).await?;
    Ok(Json(report))
}
