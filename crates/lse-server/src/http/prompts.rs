//! The completions `prompt` field: a string, token ids, or a list of either (one choice each),
//! turned into token ids the way a text prompt is tokenized (special tokens added as the
//! vocabulary asks, special-token text parsed), or with a `suffix` into fill-in-the-middle ids.

use super::body::token_ids;
use super::errors::{from_engine, ApiError, ApiResult};
use lse_engine::{Engine, Infill};
use serde_json::Value;

pub struct PromptIn {
    /// The prompt's text (token-id prompts: detokenized), for `echo`.
    pub text: String,
    pub ids: Vec<u32>,
}

fn one(engine: &Engine, v: &Value, key: &str, suffix: Option<&str>) -> ApiResult<PromptIn> {
    let tk = engine.tokenizer();
    let p = match v {
        Value::String(s) => match suffix {
            Some(suffix) => {
                let fim = Infill { prefix: s.clone(), suffix: suffix.to_string(), ..Default::default() };
                PromptIn { text: s.clone(), ids: engine.infill_ids(&fim).map_err(|e| from_engine(&e))? }
            }
            None => PromptIn { text: s.clone(), ids: tk.tokenize(s, true, true) },
        },
        Value::Array(_) if suffix.is_some() => return Err(ApiError::bad_request(format!("\"{key}\" must be text when a \"suffix\" is given (the text before the gap)"))),
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

/// Every prompt of field `key` (`prompt`; the embeddings' `input`); with a `suffix` (OpenAI's
/// fill-in-the-middle), each prompt is the text before the gap and the suffix the text after it,
/// laid out with the model's FIM tokens.
pub fn parse(engine: &Engine, key: &str, v: Option<&Value>, suffix: Option<&str>) -> ApiResult<Vec<PromptIn>> {
    let v = v.ok_or_else(|| ApiError::bad_request(format!("\"{key}\" is required")))?;
    match v {
        Value::Array(a) if a.is_empty() => Err(ApiError::bad_request(format!("\"{key}\" is an empty list"))),
        Value::Array(a) if a.iter().all(|x| x.is_number()) => Ok(vec![one(engine, v, key, suffix)?]),
        Value::Array(a) if a.iter().any(|x| x.is_number()) => {
            Err(ApiError::bad_request(format!("\"{key}\" mixes token ids with other values: give a list of token ids, or a list of prompts")))
        }
        Value::Array(a) => a.iter().enumerate().map(|(i, x)| one(engine, x, &format!("{key}[{i}]"), suffix)).collect(),
        _ => Ok(vec![one(engine, v, key, suffix)?]),
    }
}
