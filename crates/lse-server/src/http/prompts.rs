//! The completions `prompt` field: a string, token ids, or a list of either (one choice each),
//! turned into token ids the way a text prompt is tokenized (special tokens added as the
//! vocabulary asks, special-token text parsed), or with a `suffix` into fill-in-the-middle ids.
//! A list holding token ids is one prompt, as llama-server reads it: its texts tokenized in
//! place (special tokens added to a first text only) between the ids.

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
        Value::Array(a) => {
            let ids = mixed(engine, a, key, true, true)?;
            let known: Vec<u32> = ids.iter().copied().filter(|&t| (t as usize) < engine.n_vocab()).collect();
            PromptIn { text: String::from_utf8_lossy(&tk.detokenize(&known, false, true)).into_owned(), ids }
        }
        _ => return Err(ApiError::bad_request(format!("\"{key}\" must be a string, a list of token ids, or a list of those"))),
    };
    super::options::ids_in_vocabulary(&p.ids, engine.n_vocab(), Some(key))?;
    if p.ids.is_empty() {
        return Err(ApiError::bad_request(format!("\"{key}\" has no tokens")));
    }
    Ok(p)
}

/// llama-server's mixed prompt: token ids with texts among them tokenized in place (special
/// tokens added, with `add_special`, to the list's first entry only; special-token text parsed
/// with `parse_special`).
pub fn mixed(engine: &Engine, a: &[Value], key: &str, add_special: bool, parse_special: bool) -> ApiResult<Vec<u32>> {
    let tk = engine.tokenizer();
    let mut ids = Vec::with_capacity(a.len());
    for (i, x) in a.iter().enumerate() {
        match x {
            Value::String(s) => ids.extend(tk.tokenize(s, add_special && i == 0, parse_special)),
            x => ids.push(x.as_u64().filter(|&t| t <= u32::MAX as u64).map(|t| t as u32).ok_or_else(|| {
                ApiError::bad_request(format!("\"{key}\"[{i}] must be a text or a token id (an integer 0 or more), got {x}"))
            })?),
        }
    }
    Ok(ids)
}

/// Every prompt of field `key` (`prompt`; the embeddings' `input`); with a `suffix` (OpenAI's
/// fill-in-the-middle), each prompt is the text before the gap and the suffix the text after it,
/// laid out with the model's FIM tokens.
pub fn parse(engine: &Engine, key: &str, v: Option<&Value>, suffix: Option<&str>) -> ApiResult<Vec<PromptIn>> {
    let v = v.ok_or_else(|| ApiError::bad_request(format!("\"{key}\" is required")))?;
    match v {
        Value::Array(a) if a.is_empty() => Err(ApiError::bad_request(format!("\"{key}\" is an empty list"))),
        // token ids, alone or among texts: one prompt (llama-server's mixed prompt)
        Value::Array(a) if a.iter().any(Value::is_number) => Ok(vec![one(engine, v, key, suffix)?]),
        Value::Array(a) => a.iter().enumerate().map(|(i, x)| one(engine, x, &format!("{key}[{i}]"), suffix)).collect(),
        _ => Ok(vec![one(engine, v, key, suffix)?]),
    }
}
