//! `POST /v1/embeddings` (and `/embeddings`; llama-server's `/embedding` answers its own form,
//! `[{"index", "embedding": [vector]}]`): one vector per `input` (a string, token ids, or a
//! list of either), the text's final-normed rows pooled as `--pooling` (or the model) says and
//! normalised as llama-server's `embd_normalize` (Euclidean by default); `encoding_format` float
//! or base64 (little-endian f32 bytes, what the openai package asks for). The inputs run in
//! batched passes on the scheduler thread, generations stepping between them; a client that
//! leaves stops the request at its next pass.

use crate::http::body::{wrong, Fields, JsonObject};
use crate::http::errors::{from_engine, ApiError, ApiResult};
use crate::http::prompts;
use crate::http::scheduler::Job;
use crate::http::state::AppState;
use axum::extract::State;
use axum::response::Response;
use axum::Json;
use lse_engine::{EmbedRequest, Prompt};
use serde_json::{json, Value};

pub async fn embeddings(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, openai(&app, &body)).await
}

pub async fn embedding(State(app): State<AppState>, JsonObject(body): JsonObject) -> Response {
    super::counted(&app, native(&app, &body)).await
}

async fn openai(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Json<Value>> {
    let (report, base64) = run(app, body).await?;
    let tokens = report.prompt_tokens;
    let data: Vec<Value> = report
        .embeddings
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 { json!(base64_f32(v)) } else { json!(v) };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(Json(json!({"object": "list", "data": data, "model": app.model_id(), "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})))
}

/// llama-server's own form: per input its index and its rows (one, pooled).
async fn native(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<Json<Value>> {
    let (report, _) = run(app, body).await?;
    Ok(Json(json!(report.embeddings.iter().enumerate().map(|(i, v)| json!({"index": i, "embedding": [v]})).collect::<Vec<_>>())))
}

/// The request's vectors, and whether it asked for base64.
async fn run(app: &AppState, body: &serde_json::Map<String, Value>) -> ApiResult<(lse_engine::EmbedReport, bool)> {
    let ready = app.ready()?;
    let f = Fields(body);
    let pooling = ready.pooling.ok_or_else(|| {
        ApiError::bad_request("embeddings need a pooling: this model names none (a generative model); start the server with --pooling mean, cls or last")
    })?;
    let base64 = match f.str("encoding_format")? {
        None | Some("float") => false,
        Some("base64") => true,
        Some(_) => return Err(wrong("encoding_format", "\"float\" or \"base64\"")),
    };
    if let Some(d) = f.u64("dimensions")? {
        if d as usize != ready.engine.n_embd() {
            return Err(ApiError::bad_request(format!("\"dimensions\" must be the model's {} (vectors are not shortened)", ready.engine.n_embd())));
        }
    }
    let normalize = match f.i64("embd_normalize")? {
        None => lse_engine::embedding::EUCLIDEAN,
        Some(p) => i32::try_from(p).map_err(|_| wrong("embd_normalize", "-1 (none), 0 (max-abs), 1 (taxicab), 2 (Euclidean) or a larger p"))?,
    };
    // llama-server's `content` (its own form) where `input` is absent
    let key = if f.get("input").is_none() && f.get("content").is_some() { "content" } else { "input" };
    let input = prompts::parse(&ready.engine, key, f.get(key), None)?.into_iter().map(|p| Prompt::Tokens(p.ids)).collect();
    let req = EmbedRequest { input, pooling: Some(pooling), normalize };
    // every check now, not after the queue
    ready.engine.embed_inputs(&req).map_err(|e| from_engine(&e))?;
    let report = ready.scheduler.ask(|tx| Job::Embed { req, tx }).await?;
    Ok((report, base64))
}

/// The little-endian bytes of `v` in standard base64 (with padding).
fn base64_f32(v: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | (b as u32) << (16 - 8 * i));
        for k in 0..4 {
            out.push(if k <= chunk.len() { ALPHABET[(n >> (18 - 6 * k) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::base64_f32;

    #[test]
    fn base64_of_floats_is_their_little_endian_bytes() {
        // 1.0 = 00 00 80 3f; -2.5 = 00 00 20 c0; 0.5 = 00 00 00 3f
        assert_eq!(base64_f32(&[]), "");
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.5]), "AACAPwAAIMA=");
        assert_eq!(base64_f32(&[1.0, -2.5, 0.5]), "AACAPwAAIMAAAAA/");
    }
}
