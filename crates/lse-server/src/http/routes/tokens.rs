//! `POST /tokenize` and `POST /detokenize` (llama-server's fields, as lm-eval's remote
//! tokenizer uses them).

use crate::http::body::{token_ids, Fields, JsonObject};
use crate::http::errors::{ApiError, ApiResult};
use crate::http::state::AppState;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

/// `{"content"|"prompt": text (or llama-server's list of texts and token ids),
/// "add_special"|"add_special_tokens": bool (default false),
/// "parse_special": bool (default true), "with_pieces": bool}` → `{"tokens": [...]}`; with pieces
/// each token is `{"id", "piece"}`, the piece a string or, when it is not whole UTF-8, its bytes
/// (llama-server's form). Without content, no tokens (as llama-server answers).
pub async fn tokenize(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let f = Fields(&body);
    let Some((key, content)) = ["content", "prompt"].into_iter().find_map(|k| Some((k, f.get(k)?))) else {
        return Ok(Json(json!({ "tokens": [] })));
    };
    let add_special = match f.bool("add_special")? {
        Some(b) => b,
        None => f.bool("add_special_tokens")?.unwrap_or(false),
    };
    let parse_special = f.bool("parse_special")?.unwrap_or(true);
    let tk = r.engine.tokenizer();
    let ids = match content {
        Value::String(text) => tk.tokenize(text, add_special, parse_special),
        // llama-server's mixed content: ids kept, texts tokenized in place
        Value::Array(a) => {
            let ids = crate::http::prompts::mixed(&r.engine, a, key, add_special, parse_special)?;
            crate::http::options::ids_in_vocabulary(&ids, r.engine.n_vocab(), Some(key))?;
            ids
        }
        v => return Err(ApiError::bad_request(format!("\"{key}\" must be a text or a list of texts and token ids, got {v}"))),
    };
    if !f.bool("with_pieces")?.unwrap_or(false) {
        return Ok(Json(json!({ "tokens": ids })));
    }
    let piece = |id: u32| {
        let bytes = tk.token_to_piece(id, true);
        match String::from_utf8(bytes) {
            Ok(s) => json!(s),
            Err(e) => json!(e.into_bytes()),
        }
    };
    Ok(Json(json!({ "tokens": ids.iter().map(|&id| json!({"id": id, "piece": piece(id)})).collect::<Vec<_>>() })))
}

/// `{"tokens": [...]}` → `{"prompt": text, "content": text}`; without tokens, the empty text (as
/// llama-server answers).
pub async fn detokenize(State(app): State<AppState>, JsonObject(body): JsonObject) -> ApiResult<Json<Value>> {
    let r = app.ready()?;
    let f = Fields(&body);
    let ids = match f.get("tokens") {
        Some(v) => token_ids("tokens", v)?,
        None => Vec::new(),
    };
    crate::http::options::ids_in_vocabulary(&ids, r.engine.n_vocab(), None)?;
    let text = String::from_utf8_lossy(&r.engine.tokenizer().detokenize(&ids, false, true)).into_owned();
    Ok(Json(json!({ "prompt": text, "content": text })))
}
