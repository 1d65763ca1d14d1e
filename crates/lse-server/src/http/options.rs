//! OpenAI (and llama-server) body fields → the engine's `GenerateRequest`. Only syntax is
//! checked here (types, `n`); ranges are `GenerateRequest::validate`'s job, the one place.

use super::body::{wrong, Fields};
use super::errors::{ApiError, ApiResult};
use lse_engine::{GenerateRequest, Prompt};

/// OpenAI's default `max_tokens` for completions.
pub const DEFAULT_MAX_TOKENS: i64 = 16;

/// A 400 when a body turns on one of llama-server's samplers that LSE does not have (they
/// would be ignored without a word, and the text not the one asked); each is off as llama.cpp
/// leaves it off (its defaults, and XTC above a 0.5 threshold, DRY below base 1 or over no tokens).
fn refuse_other_samplers(f: &Fields) -> ApiResult<()> {
    let num = |key: &str, default: f32| -> ApiResult<f32> { Ok(f.f32(key)?.unwrap_or(default)) };
    let on = [
        ("mirostat", num("mirostat", 0.0)? != 0.0),
        ("typical_p", num("typical_p", 1.0)? < 1.0),
        ("xtc_probability", num("xtc_probability", 0.0)? > 0.0 && num("xtc_threshold", 0.1)? <= 0.5),
        ("dry_multiplier", num("dry_multiplier", 0.0)? != 0.0 && num("dry_base", 1.75)? >= 1.0 && num("dry_penalty_last_n", -1.0)? != 0.0),
        ("top_n_sigma", num("top_n_sigma", -1.0)? > 0.0),
        ("dynatemp_range", num("dynatemp_range", 0.0)? > 0.0),
    ];
    match on.iter().find(|(_, on)| *on) {
        Some((key, _)) => Err(ApiError::bad_request(format!(
            "\"{key}\" is not supported: LSE samples with temperature, top_k, top_p, min_p, the penalties and logit_bias"
        ))),
        None => Ok(()),
    }
}

/// A 400 for llama-server's `post_sampling_probs` on an OpenAI route, whose log-probs stay
/// OpenAI's (llama-server writes `prob` and `top_probs` into them, which OpenAI clients do not read).
pub fn refuse_post_sampling_probs(f: &Fields) -> ApiResult<()> {
    if f.bool("post_sampling_probs")?.unwrap_or(false) {
        return Err(ApiError::bad_request("\"post_sampling_probs\" is taken by /completion and /infill (llama-server's form); OpenAI's routes report log-probs"));
    }
    Ok(())
}

/// vLLM's default most alternatives per token on OpenAI's routes (OpenAI's chat bound; its legacy
/// completions take 5); llama-server's `n_probs` has no such bound (the vocabulary's size).
pub const OPENAI_MAX_TOP_LOGPROBS: usize = 20;

/// `n` of the OpenAI field `key` (`top_logprobs`, or `logprobs` on the legacy completions), or a
/// 400 above [`OPENAI_MAX_TOP_LOGPROBS`].
pub fn openai_top_logprobs(key: &str, n: usize) -> ApiResult<usize> {
    if n > OPENAI_MAX_TOP_LOGPROBS {
        return Err(ApiError::bad_request(format!("\"{key}\" must be at most {OPENAI_MAX_TOP_LOGPROBS}, got {n}")));
    }
    Ok(n)
}

/// The sampling and stopping options of a body; the prompt is left empty for the caller.
pub fn generate_request(f: &Fields, max_keys: &[&str], default_max: i64) -> ApiResult<GenerateRequest> {
    let mut r = GenerateRequest { prompt: Prompt::Tokens(Vec::new()), max_tokens: default_max, ..Default::default() };
    for k in max_keys {
        if let Some(n) = f.i64(k)? {
            r.max_tokens = n;
            break;
        }
    }
    refuse_other_samplers(f)?;
    let s = &mut r.sampling;
    if let Some(v) = f.f32("temperature")? {
        s.temperature = v;
    }
    if let Some(v) = f.f32("top_p")? {
        s.top_p = v;
    }
    if let Some(v) = f.i64("top_k")? {
        s.top_k = v;
    }
    if let Some(v) = f.f32("min_p")? {
        s.min_p = v;
    }
    if let Some(v) = f.f32("repeat_penalty")? {
        s.repeat_penalty = v;
    }
    if let Some(v) = f.i64("repeat_last_n")? {
        s.repeat_last_n = v;
    }
    if let Some(v) = f.f32("presence_penalty")? {
        s.presence_penalty = v;
    }
    if let Some(v) = f.f32("frequency_penalty")? {
        s.frequency_penalty = v;
    }
    // llama-server: a negative seed asks for a random one
    if let Some(v) = f.i64("seed")? {
        s.seed = (v >= 0).then_some(v as u64);
    }
    if let Some(v) = f.get("logit_bias") {
        // OpenAI's map or llama-server's list of pairs (the engine's one reading of either)
        s.logit_bias = lse_engine::generation::logit_bias::deserialize(v).map_err(|e| ApiError::bad_request(format!("\"logit_bias\": {e}")))?;
    }
    if let Some(v) = f.bool("ignore_eos")? {
        r.ignore_eos = v;
    }
    // vLLM's
    if let Some(v) = f.get("stop_token_ids") {
        r.stop_token_ids = super::body::token_ids("stop_token_ids", v)?;
    }
    if let Some(v) = f.u64("min_tokens")? {
        r.min_tokens = v as usize;
    }
    (r.json_object, r.json_schema) = json_mode(f)?;
    r.stop = match f.get("stop") {
        None => Vec::new(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        Some(serde_json::Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_string).ok_or_else(|| wrong("stop", "a string or a list of strings")))
            .collect::<ApiResult<_>>()?,
        Some(_) => return Err(wrong("stop", "a string or a list of strings")),
    };
    Ok(r)
}

/// JSON mode and JSON schema mode, from OpenAI's `response_format` (`{"type": "json_object"}`,
/// `{"type": "json_schema", "json_schema": {"schema": ..}}`) or llama-server's forms (a `schema`
/// beside `json_object`, a `json_schema` field); refuses the constrained decoding LSE does not do
/// (grammars, guided decoding), so a client that asked for it does not get
/// unconstrained text silently. The schema itself is checked by the engine's validation; tools are
/// the chat route's (`tools::forced`).
fn json_mode(f: &Fields) -> ApiResult<(bool, Option<serde_json::Value>)> {
    let mut mode = (false, f.get("json_schema").cloned());
    if let Some(v) = f.get("response_format") {
        match v.get("type").and_then(|t| t.as_str()) {
            Some("text") => {}
            Some("json_object") => match v.get("schema") {
                Some(s) => mode.1 = Some(s.clone()),
                None => mode.0 = true,
            },
            Some("json_schema") => {
                let s = v.get("json_schema").and_then(|j| j.get("schema"));
                mode.1 = Some(s.cloned().ok_or_else(|| wrong("response_format", "{\"type\": \"json_schema\", \"json_schema\": {\"schema\": {..}}}"))?);
            }
            kind => {
                return Err(ApiError::bad_request(format!(
                    "\"response_format\" {} is not supported: LSE samples text, one JSON object (json_object) or a value of a schema (json_schema)",
                    kind.unwrap_or("(no type)")
                )))
            }
        }
    }
    for key in ["grammar", "guided_json", "guided_regex", "guided_choice", "guided_grammar"] {
        // null and "" say none (front ends send their empty default, llama-server reads it so)
        if f.get(key).is_some_and(|v| !v.is_null() && v.as_str() != Some("")) {
            return Err(ApiError::bad_request(format!("\"{key}\" is not supported: use response_format json_object or json_schema")));
        }
    }
    Ok(mode)
}

/// The tokens a prompt of `prompt_len` may be followed by: `requested` when one of `keys` was
/// given, else, or when it is -1 (llama-server's `n_predict` default, which its `/props` shows),
/// until the context is full; a 400 when the prompt leaves no room.
pub fn max_tokens_or_room(f: &Fields, keys: &[&str], requested: i64, prompt_len: usize, cap: usize) -> ApiResult<i64> {
    prompt_fits(prompt_len, cap, true)?;
    let unset = keys.iter().all(|k| f.get(k).is_none());
    Ok(if requested == -1 || (requested < 0 && unset) { (cap - prompt_len) as i64 } else { requested })
}

/// A 400 when a prompt of `prompt_len` tokens does not fit the context of `cap`, or, when it is
/// to be followed by generated tokens (`generating`), fills it.
pub fn prompt_fits(prompt_len: usize, cap: usize, generating: bool) -> ApiResult<()> {
    if prompt_len > cap || (generating && prompt_len == cap) {
        return Err(ApiError::exceeds_context(prompt_len, cap, generating));
    }
    Ok(())
}

/// A 400 naming the first of `ids` (of field `key`, when given) outside a vocabulary of
/// `n_vocab` tokens.
pub fn ids_in_vocabulary(ids: &[u32], n_vocab: usize, key: Option<&str>) -> ApiResult<()> {
    lse_engine::check_token_ids(ids, n_vocab).map_err(|e| ApiError::bad_request(key.map_or(e.to_string(), |k| format!("\"{k}\": {e}"))))
}

/// `validate()` for a request whose prompt is set, as a 400.
pub fn validated(r: GenerateRequest) -> ApiResult<GenerateRequest> {
    r.validate().map_err(ApiError::bad_request)?;
    Ok(r)
}

/// llama-server's `cache_prompt` (default true): the request may start in a kept session
/// sharing a prefix with its prompt. The output is the same either way (batch invariance).
pub fn cache_prompt(f: &Fields) -> ApiResult<bool> {
    Ok(f.bool("cache_prompt")?.unwrap_or(true))
}

/// Most choices one request may ask for (`n`).
pub const MAX_CHOICES: i64 = 16;

/// OpenAI's `n`: choices per prompt, 1 to [`MAX_CHOICES`]. `best_of`, when given, must equal it
/// (choices are not ranked).
pub fn choices(f: &Fields) -> ApiResult<usize> {
    let n = f.i64("n")?.unwrap_or(1);
    if !(1..=MAX_CHOICES).contains(&n) {
        return Err(ApiError::bad_request(format!("\"n\" must be between 1 and {MAX_CHOICES}, got {n}")));
    }
    if let Some(b) = f.i64("best_of")? {
        if b != n {
            return Err(ApiError::bad_request(format!("\"best_of\" must equal \"n\" ({n}): choices are not ranked, got {b}")));
        }
    }
    Ok(n as usize)
}

/// The request of choice `j`: with a seed, choice j samples with seed + j, so the choices differ
/// and the whole request repeats.
pub fn for_choice(r: &GenerateRequest, j: usize) -> GenerateRequest {
    let mut r = r.clone();
    r.sampling.seed = r.sampling.seed.map(|s| s.wrapping_add(j as u64));
    r
}

/// `stream` and `stream_options.include_usage`.
pub fn stream_flags(f: &Fields) -> ApiResult<(bool, bool)> {
    let stream = f.bool("stream")?.unwrap_or(false);
    let usage = match f.get("stream_options") {
        None => false,
        Some(serde_json::Value::Object(m)) => Fields(m).bool("include_usage")?.unwrap_or(false),
        Some(_) => return Err(wrong("stream_options", "an object")),
    };
    if !stream && f.get("stream_options").is_some() {
        // as OpenAI and vLLM answer
        return Err(ApiError::bad_request("\"stream_options\" is only allowed when \"stream\" is true"));
    }
    Ok((stream, usage))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn max_tokens_minus_one_means_until_the_context_is_full() {
        let room = |body: Value, requested| {
            let Value::Object(m) = body else { unreachable!() };
            max_tokens_or_room(&Fields(&m), &["n_predict"], requested, 100, 1000).map_err(|e| e.body().to_string())
        };
        assert_eq!(room(json!({}), -1).unwrap(), 900);
        assert_eq!(room(json!({"n_predict": -1}), -1).unwrap(), 900);
        assert_eq!(room(json!({"n_predict": 5}), 5).unwrap(), 5);
        // other negatives stay what was asked (validation refuses them)
        assert_eq!(room(json!({"n_predict": -2}), -2).unwrap(), -2);
        let Value::Object(m) = json!({}) else { unreachable!() };
        assert!(max_tokens_or_room(&Fields(&m), &["n_predict"], -1, 1000, 1000).is_err());
    }
}
