//! The completions `prompt` field: a string, token ids, or a list of either (one choice each),
//! turned into token ids the way a text prompt is tokenized (special tokens added as the
//! vocabulary asks, special-token text parsed).

use super::body::token_ids;
use super::errors::{ApiError, ApiResult};
use lse_engine::Engine;
use serde_json::Value;

pub struct PromptIn {
    /// The prompt's text (token-id prompts: detokenized), for `echo`.
    pub text: String,
    pub ids: Vec<u32>,
}

fn one(engine: &Engine, v: &Value, key: &str) -> ApiResult<PromptIn> {
    let tk = engine.tokenizer();
    let p = match v {
        Value::String(s) => PromptIn { text: s.clone(), ids: tk.tokenize(s, true, true) },
        Value::Array(_) => {
            let ids = token_ids(key, v)?;
            let text = String::from_utf8_lossy(&tk.detokenize(&ids.iter().copied().filter(|&t| (t as usize) < engine.n_vocab()).collect::<Vec<_>>(), false, true)).into_owned();
            PromptIn { text, ids }
        }
        _ => return Err(ApiError::bad_request(format!("\"{key}\" must be a string, a list of token ids, or a list of those"))),
    };
    if let Some((i, &id)) = p.ids.iter().enumerate().find(|(_, &t)| t as usize >= engine.n_vocab()) {
        return Err(ApiError::bad_request(format!("token id {id} at index {i} of \"{key}\" is outside the vocabulary of {}", engine.n_vocab())));
    }
    if p.ids.is_empty() {
        return Err(ApiError::bad_request(format!("\"{key}\" has no tokens")));
    }
    Ok(p)
}

/// Every prompt of the field.
pub fn parse(engine: &Engine, v: Option<&Value>) -> ApiResult<Vec<PromptIn>> {
    let v = v.ok_or_else(|| ApiError::bad_request("\"prompt\" is required"))?;
    match v {
        Value::Array(a) if a.is_empty() => Err(ApiError::bad_request("\"prompt\" is an empty list")),
        Value::Array(a) if a.iter().all(|x| x.is_number()) => Ok(vec![one(engine, v, "prompt")?]),
        Value::Array(a) => a.iter().enumerate().map(|(i, x)| one(engine, x, &format!("prompt[{i}]"))).collect(),
        _ => Ok(vec![one(engine, v, "prompt")?]),
    }
}
