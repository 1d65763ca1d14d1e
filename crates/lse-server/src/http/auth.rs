//! `--api-key`: every route but `/health` wants `Authorization: Bearer KEY` (or `X-Api-Key`).

use super::errors::ApiError;
use super::state::AppState;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub async fn require_key(State(app): State<AppState>, req: Request, next: Next) -> Response {
    let Some(key) = app.api_key.as_deref() else {
        return next.run(req).await;
    };
    if req.uri().path() == "/health" {
        return next.run(req).await;
    }
    let h = req.headers();
    // the scheme's name is case-insensitive (RFC 9110)
    let bearer = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().split_once(' ')).filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer")).map(|(_, k)| k.trim());
    let x = h.get("x-api-key").and_then(|v| v.to_str().ok());
    if bearer == Some(key) || x == Some(key) {
        next.run(req).await
    } else {
        ApiError::new(StatusCode::UNAUTHORIZED, "invalid or missing API key").into_response()
    }
}
