//! The one error shape every route answers with: `{"error": {"message", "type", "code"}}` and the
//! HTTP status that fits (OpenAI's envelope, as llama-server sends it).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// A prompt beyond the context: its tokens and the context's (llama-server's
    /// `exceed_context_size_error`, which clients that trim a conversation look for).
    pub exceeds: Option<(usize, usize)>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), exceeds: None }
    }

    /// A 400 for a prompt of `tokens` that the context of `n_ctx` cannot hold (`generating`: with
    /// a token's room to generate after it).
    pub fn exceeds_context(tokens: usize, n_ctx: usize, generating: bool) -> ApiError {
        let room = if generating { ", leaving no room to generate" } else { "" };
        let message = format!("the prompt has {tokens} tokens; the context holds {n_ctx} (--kv-len){room}");
        ApiError { exceeds: Some((tokens, n_ctx)), ..ApiError::bad_request(message) }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// OpenAI's error `type` for the status.
    pub fn kind(&self) -> &'static str {
        if self.exceeds.is_some() {
            return "exceed_context_size_error";
        }
        match self.status.as_u16() {
            400 | 405 | 413 | 422 => "invalid_request_error",
            401 | 403 => "authentication_error",
            404 => "not_found_error",
            501 => "not_supported_error",
            503 => "unavailable_error",
            _ => "server_error",
        }
    }

    pub fn body(&self) -> serde_json::Value {
        let mut e = serde_json::json!({ "message": self.message, "type": self.kind(), "code": self.status.as_u16() });
        if let Some((tokens, n_ctx)) = self.exceeds {
            e["n_prompt_tokens"] = tokens.into();
            e["n_ctx"] = n_ctx.into();
        }
        serde_json::json!({ "error": e })
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}

/// An engine failure: the request's fault (400) or the server's (500).
pub fn from_engine(e: &lse_engine::EngineError) -> ApiError {
    use lse_engine::EngineError as E;
    match e {
        E::PromptTooLong { tokens, capacity } => ApiError::exceeds_context(*tokens, *capacity, true),
        E::InvalidRequest(_) | E::InvalidToken { .. } | E::WindowTooLong { .. } | E::InvalidOption(_) => ApiError::bad_request(e.to_string()),
        E::Cancelled => stopped(),
        _ => ApiError::internal(e.to_string()),
    }
}

/// A long job given up between its passes: nobody waits for it any more.
pub fn stopped() -> ApiError {
    ApiError::unavailable("stopped: the client left or the server is shutting down")
}

/// A perplexity run's error, the request's fault (400) or the server's (500); the request's
/// options named by their fields (the server's own flags, such as `--kv-len`, stay flags: its
/// operator gave them).
pub fn from_eval(e: &lse_eval::EvalError) -> ApiError {
    use lse_eval::EvalError as E;
    let message = lse_engine::respell(&e.to_string(), lse_eval::REQUEST_FIELDS);
    match e {
        E::Engine(_) | E::Output(_) => ApiError::internal(message),
        E::Cancelled => stopped(),
        _ => ApiError::bad_request(message),
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
