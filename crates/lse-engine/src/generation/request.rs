//! The generation request: every option, its default and its validation, in one place. Front
//! ends (CLI flags, C/Python JSON, HTTP bodies) only translate their syntax into this struct.

use serde::{Deserialize, Serialize};

/// What the model is prompted with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged, expecting = "prompt must be a string, an array of token ids (integers from 0) or {\"prefix\", \"suffix\"}")]
pub enum Prompt {
    /// Tokenized as a prompt: special tokens added as the vocabulary asks, special text parsed.
    Text(String),
    /// Token ids, fed as they are.
    Tokens(Vec<u32>),
    /// Fill in the middle: the text before and after a gap ([`super::Infill`]).
    Infill(super::Infill),
}

/// The sampler chain's settings, with llama.cpp's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplingParams {
    /// 0 (or below) is greedy.
    pub temperature: f32,
    /// 0 keeps every token.
    pub top_k: i64,
    /// In (0, 1]; 1 keeps every token.
    pub top_p: f32,
    /// In [0, 1]; 0 keeps every token.
    pub min_p: f32,
    /// 1 is off.
    pub repeat_penalty: f32,
    /// Tokens (prompt included) the penalties look back over; 0 off, -1 the whole session.
    pub repeat_last_n: i64,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// `None`: a fresh seed each request.
    pub seed: Option<u64>,
    /// Added to these tokens' logits before the other samplers (−∞ bans a token).
    #[serde(with = "super::logit_bias")]
    pub logit_bias: super::LogitBias,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: None,
            logit_bias: super::LogitBias::new(),
        }
    }
}

/// One generation request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GenerateRequest {
    pub prompt: Prompt,
    /// Tokens to generate at most (`-n`).
    pub max_tokens: i64,
    #[serde(flatten)]
    pub sampling: SamplingParams,
    /// Generation stops before the first occurrence of any of these in the text.
    pub stop: Vec<String>,
    /// Keep going past end-of-generation tokens.
    pub ignore_eos: bool,
    /// More tokens that end the generation as an end-of-generation token does (vLLM's
    /// `stop_token_ids`; they end it even with `ignore_eos`).
    pub stop_token_ids: Vec<u32>,
    /// Tokens generated before an end-of-generation token or a `stop_token_ids` one may be
    /// sampled (vLLM's `min_tokens`; their logits are −∞ until then).
    pub min_tokens: usize,
    /// Most likely alternatives to report per step with their log-probs (at most the vocabulary).
    pub top_logprobs: usize,
    /// With `top_logprobs`, also report each step's probabilities after the sampler chain
    /// (llama-server's `post_sampling_probs`): the chosen token's and the `top_logprobs` most
    /// likely candidates the chain kept, at the request's temperature (greedy: the pick alone, 1).
    pub post_sampling_probs: bool,
    /// Add BOS/EOS as the vocabulary asks when tokenizing a text prompt.
    pub add_special: bool,
    /// JSON mode: only tokens that keep the text the start of one JSON object are sampled, and
    /// the generation ends when the object closes (OpenAI's `response_format` `json_object`).
    pub json_object: bool,
    /// JSON schema mode: as JSON mode, for a value of this schema (OpenAI's `json_schema`; the
    /// subset `generation::Schema` compiles).
    pub json_schema: Option<serde_json::Value>,
    /// The start of the constrained value, already at the end of the prompt (a continued chat
    /// turn's text): the constraint reads it before the first token. The server's; not a field
    /// of the JSON request.
    #[serde(skip)]
    pub value_prefix: String,
}

impl Default for GenerateRequest {
    fn default() -> Self {
        GenerateRequest {
            prompt: Prompt::Text(String::new()),
            max_tokens: 128,
            sampling: SamplingParams::default(),
            stop: Vec::new(),
            ignore_eos: false,
            stop_token_ids: Vec::new(),
            min_tokens: 0,
            top_logprobs: 0,
            post_sampling_probs: false,
            add_special: true,
            json_object: false,
            json_schema: None,
            value_prefix: String::new(),
        }
    }
}

impl GenerateRequest {
    /// Parses the JSON request object (C API, Python, `--generate` options).
    pub fn from_json(s: &str) -> Result<GenerateRequest, String> {
        let r: GenerateRequest = serde_json::from_str(s).map_err(|e| match bad_field::<GenerateRequest>(s, serde_json::Map::new()) {
            Some((field, why)) => format!("generation request field \"{field}\": {why}"),
            None => format!("generation request: {e}"),
        })?;
        r.validate()?;
        Ok(r)
    }

    /// Refuses out-of-range options with one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        let s = &self.sampling;
        match &self.prompt {
            Prompt::Text(t) if t.is_empty() => return Err("the prompt is empty".into()),
            Prompt::Tokens(t) if t.is_empty() => return Err("the prompt has no tokens".into()),
            _ => {}
        }
        if self.max_tokens < 0 {
            return Err(format!("max tokens (-n) must be 0 or more, got {}", self.max_tokens));
        }
        if s.temperature < 0.0 || !s.temperature.is_finite() {
            return Err(format!("temperature must be 0 or more, got {}", s.temperature));
        }
        if s.top_k < 0 {
            return Err(format!("top-k must be 0 or more, got {}", s.top_k));
        }
        if !(s.top_p > 0.0 && s.top_p <= 1.0) {
            return Err(format!("top-p must be in (0, 1], got {}", s.top_p));
        }
        if !(s.min_p >= 0.0 && s.min_p <= 1.0) {
            return Err(format!("min-p must be in [0, 1], got {}", s.min_p));
        }
        if s.repeat_penalty <= 0.0 || !s.repeat_penalty.is_finite() {
            return Err(format!("repeat penalty must be above 0, got {}", s.repeat_penalty));
        }
        if s.repeat_last_n < -1 {
            return Err(format!("repeat-last-n must be -1, 0 or more, got {}", s.repeat_last_n));
        }
        for (name, v) in [("presence", s.presence_penalty), ("frequency", s.frequency_penalty)] {
            if !v.is_finite() {
                return Err(format!("{name} penalty must be finite, got {v}"));
            }
        }
        super::logit_bias::validate(&s.logit_bias)?;
        if self.stop.iter().any(|s| s.is_empty()) {
            return Err("stop strings must not be empty".into());
        }
        if let Some(s) = &self.json_schema {
            if self.json_object {
                return Err("json_object and json_schema exclude each other (a schema is JSON mode for that schema)".into());
            }
            super::json_schema::Schema::compile(s)?;
        }
        Ok(())
    }
}

/// The first field of a JSON request object that fails on its own (added to `base`, valid values
/// of the required fields) and why, to name it in the message: serde's own error of the whole
/// text says only what it expected and where in the text.
pub(crate) fn bad_field<T: serde::de::DeserializeOwned>(s: &str, base: serde_json::Map<String, serde_json::Value>) -> Option<(String, String)> {
    let serde_json::Value::Object(fields) = serde_json::from_str(s).ok()? else { return None };
    fields.into_iter().find_map(|(k, v)| {
        let mut alone = base.clone();
        alone.insert(k.clone(), v);
        serde_json::from_value::<T>(serde_json::Value::Object(alone)).err().map(|e| (k, plain_types(&e.to_string())))
    })
}

/// serde's Rust type names in a message as the JSON caller's words ("expected u64" → "expected a
/// non-negative integer"; the narrow types with their range, which an integer may be outside).
fn plain_types(msg: &str) -> String {
    const NAMES: [(&str, &str); 8] = [
        ("expected u64", "expected a non-negative integer"),
        ("expected u32", "expected an integer from 0 to 4294967295"),
        ("expected usize", "expected a non-negative integer"),
        ("expected i64", "expected an integer"),
        ("expected i32", "expected an integer from -2147483648 to 2147483647"),
        ("expected isize", "expected an integer"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
    ];
    let mut out = msg.to_string();
    for (rust, json) in NAMES {
        if let Some(i) = out.find(rust).filter(|&i| !out[i + rust.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())) {
            out.replace_range(i..i + rust.len(), json);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field's own error in JSON's words; a narrow type's range where a value may overflow it.
    #[test]
    fn field_errors_name_json_types() {
        let e = GenerateRequest::from_json(r#"{"prompt": "a", "seed": -1}"#).unwrap_err();
        assert_eq!(e, "generation request field \"seed\": invalid value: integer `-1`, expected a non-negative integer");
        let e = GenerateRequest::from_json(r#"{"prompt": "a", "stop_token_ids": [5000000000]}"#).unwrap_err();
        assert_eq!(e, "generation request field \"stop_token_ids\": invalid value: integer `5000000000`, expected an integer from 0 to 4294967295");
        let e = GenerateRequest::from_json(r#"{"prompt": "a", "temperature": "hot"}"#).unwrap_err();
        assert_eq!(e, "generation request field \"temperature\": invalid type: string \"hot\", expected a number");
    }
}
