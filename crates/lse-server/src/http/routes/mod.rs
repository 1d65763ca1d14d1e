//! The HTTP routes, one file each.

pub mod chat;
pub mod completion;
pub mod completions;
pub mod embeddings;
pub mod infill;
pub mod info;
pub mod perplexity;
pub mod slot_action;
pub mod tokens;

use crate::http::errors::ApiResult;
use crate::http::state::AppState;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering::Relaxed;

/// A route's answer: its body run, the request counted and, when it fails, the failure (answered
/// as its JSON error).
pub async fn counted<T: IntoResponse>(app: &AppState, body: impl std::future::Future<Output = ApiResult<T>>) -> Response {
    app.metrics.requests.fetch_add(1, Relaxed);
    match body.await {
        Ok(r) => r.into_response(),
        Err(e) => {
            app.metrics.requests_failed.fetch_add(1, Relaxed);
            e.into_response()
        }
    }
}
