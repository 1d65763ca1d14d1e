//! Embeddings: the final-normed hidden rows of a text (what the LM head would read) pooled into one
//! vector, as llama.cpp's `--embeddings --pooling` computes them, through the same batched prefill
//! scoring and serving use. Every input is a fresh session; all of them share the passes.

use crate::{Engine, EngineError};
use serde::{Deserialize, Serialize};

/// How a text's rows become one vector (llama.cpp's pooling types that give one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The average of every row.
    Mean,
    /// The first row.
    Cls,
    /// The last row (causal embedding models, e.g. Qwen3-Embedding).
    Last,
}

impl Pooling {
    pub fn parse(s: &str) -> Result<Pooling, String> {
        match s {
            "mean" => Ok(Pooling::Mean),
            "cls" => Ok(Pooling::Cls),
            "last" => Ok(Pooling::Last),
            _ => Err(format!("pooling must be mean, cls or last, got {s:?}")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Pooling::Mean => "mean",
            Pooling::Cls => "cls",
            Pooling::Last => "last",
        }
    }
}

/// llama.cpp's default normalisation of a pooled vector (`embd_normalize` 2: Euclidean).
pub const EUCLIDEAN: i32 = 2;

/// Scales `v` by llama.cpp's `embd_normalize` rule `p`: -1 leaves it, 0 maps the largest magnitude
/// to 32760 (an int16 range), 2 gives a Euclidean length of 1, any other p a p-norm of 1 (1:
/// taxicab). The norm is summed in f64, a p-norm over magnitudes relative to the largest (so that
/// a large p neither underflows nor overflows: it tends to the largest magnitude); an all-zero
/// vector stays zero.
pub fn normalize(v: &mut [f32], p: i32) {
    let max_abs = || v.iter().fold(0f64, |m, &x| m.max(x.abs() as f64));
    let norm = match p {
        -1 => return,
        0 => max_abs() / 32760.0,
        2 => v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt(),
        _ => match max_abs() {
            0.0 => 0.0,
            m => m * v.iter().map(|&x| (x.abs() as f64 / m).powi(p)).sum::<f64>().powf(1.0 / p as f64),
        },
    };
    let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
    v.iter_mut().for_each(|x| *x *= scale);
}

/// Inputs one request may hold (OpenAI's limit for an embeddings request).
pub const MAX_INPUTS: usize = 2048;

/// The inputs of one forward pass of an embeddings request: until they hold this many tokens
/// (or [`GROUP_INPUTS`] inputs), so a request's sessions, and its memory, stay bounded whatever
/// its length (every input's vector is the same whatever runs beside it: batch invariance).
const GROUP_TOKENS: usize = 2048;
const GROUP_INPUTS: usize = 64;

/// An embeddings request: every option, its default and its checks in one place; the C and
/// Python front ends send it as JSON, the HTTP route translates its body into it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbedRequest {
    /// The texts (tokenized as prompts: special tokens added as the vocabulary asks, special-token
    /// text parsed) or token-id lists; JSON: one string, one id list, or a list of either.
    #[serde(deserialize_with = "inputs")]
    pub input: Vec<crate::Prompt>,
    /// How rows are pooled; `None`: the model's own ([`Engine::model_pooling`]).
    #[serde(default)]
    pub pooling: Option<Pooling>,
    /// llama.cpp's `embd_normalize` (see [`normalize`]).
    #[serde(default = "euclidean")]
    pub normalize: i32,
}

fn euclidean() -> i32 {
    EUCLIDEAN
}

/// `input`: a string, a list of ids, or a list of strings and id lists.
fn inputs<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<crate::Prompt>, D::Error> {
    use crate::Prompt;
    use serde::de::Error;
    let v = serde_json::Value::deserialize(d)?;
    let one = |v: &serde_json::Value| serde_json::from_value::<Prompt>(v.clone()).ok().filter(|p| !matches!(p, Prompt::Infill(_)));
    let bad = || D::Error::custom("input must be a string, a list of token ids, or a list of those");
    match &v {
        serde_json::Value::Array(a) if !a.is_empty() && !a.iter().all(|x| x.is_number()) => a.iter().map(|x| one(x).ok_or_else(bad)).collect(),
        _ => Ok(vec![one(&v).ok_or_else(bad)?]),
    }
}

impl EmbedRequest {
    /// Parses the JSON request object (C API, Python) and checks it.
    pub fn from_json(s: &str) -> Result<EmbedRequest, String> {
        let r: EmbedRequest = serde_json::from_str(s).map_err(|e| {
            let base = [("input".to_string(), serde_json::Value::from("x"))].into_iter().collect();
            match crate::generation::bad_field::<EmbedRequest>(s, base) {
                Some((field, why)) => format!("embeddings request field \"{field}\": {why}"),
                None => format!("embeddings request: {e}"),
            }
        })?;
        r.validate()?;
        Ok(r)
    }

    /// Refuses what cannot be embedded with one line naming the option.
    pub fn validate(&self) -> Result<(), String> {
        if self.input.is_empty() {
            return Err("input is empty".into());
        }
        if self.input.len() > MAX_INPUTS {
            return Err(format!("input holds {} entries; at most {MAX_INPUTS} a request", self.input.len()));
        }
        for (i, p) in self.input.iter().enumerate() {
            match p {
                crate::Prompt::Text(t) if t.is_empty() => return Err(format!("input {i} is an empty text")),
                crate::Prompt::Tokens(t) if t.is_empty() => return Err(format!("input {i} has no tokens")),
                crate::Prompt::Infill(_) => return Err(format!("input {i}: fill-in-the-middle prompts are not embedded")),
                _ => {}
            }
        }
        if self.normalize < -1 {
            return Err(format!("normalize must be -1 (none), 0 (max-abs), 1 (taxicab), 2 (Euclidean) or a larger p, got {}", self.normalize));
        }
        Ok(())
    }
}

/// The vectors of a request, as every front end returns them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EmbedReport {
    pub object: &'static str,
    pub pooling: Pooling,
    pub normalize: i32,
    /// Tokens of all inputs.
    pub prompt_tokens: usize,
    /// One vector of `n_embd` per input, in input order.
    pub embeddings: Vec<Vec<f32>>,
}

impl Engine {
    /// Runs an embeddings request: the inputs tokenized, pooled as asked (or as the model says; an
    /// error when neither names a pooling), normalised.
    pub fn embed_request(&self, r: &EmbedRequest) -> Result<EmbedReport, EngineError> {
        self.embed_request_between(r, &mut || true)
    }

    /// [`Engine::embed_request`], calling `between` before each forward pass of its inputs and
    /// stopping with [`EngineError::Cancelled`] when it says nobody waits for the answer (the
    /// server steps generations there).
    pub fn embed_request_between(&self, r: &EmbedRequest, between: &mut dyn FnMut() -> bool) -> Result<EmbedReport, EngineError> {
        let (pooling, ids) = self.embed_inputs(r)?;
        let refs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let embeddings = self.embed_between(&refs, pooling, r.normalize, between)?;
        Ok(EmbedReport { object: "lse.embeddings", pooling, normalize: r.normalize, prompt_tokens: ids.iter().map(Vec::len).sum(), embeddings })
    }

    /// A request's pooling and its inputs' tokens, every check of the request done (the server
    /// asks before queueing it).
    pub fn embed_inputs(&self, r: &EmbedRequest) -> Result<(Pooling, Vec<Vec<u32>>), EngineError> {
        r.validate().map_err(EngineError::InvalidRequest)?;
        let pooling = r.pooling.or(self.model_pooling()).ok_or_else(|| {
            EngineError::InvalidRequest("embeddings need a pooling: this model names none (a generative model); ask for mean, cls or last".into())
        })?;
        let mut ids = Vec::with_capacity(r.input.len());
        for (i, p) in r.input.iter().enumerate() {
            let t = self.prompt_tokens(p, true)?.into_owned();
            crate::check_token_ids(&t, self.n_vocab()).map_err(|e| EngineError::InvalidRequest(format!("input {i}: {e}")))?;
            if t.len() > self.kv_capacity() {
                return Err(EngineError::InvalidRequest(format!("input {i} has {} tokens; the context holds {} (--kv-len)", t.len(), self.kv_capacity())));
            }
            ids.push(t);
        }
        Ok((pooling, ids))
    }

    /// The pooling the GGUF names (`{arch}.pooling_type`, set by embedding models); `None` for
    /// generative models and for types that give no single vector (none, rank).
    pub fn model_pooling(&self) -> Option<Pooling> {
        match self.model.w.key_u64("pooling_type") {
            Some(1) => Some(Pooling::Mean),
            Some(2) => Some(Pooling::Cls),
            Some(3) => Some(Pooling::Last),
            _ => None,
        }
    }

    /// One vector of `n_embd` per input (token ids, special tokens already in), pooled and then
    /// normalised by `normalize` (see [`normalize`]).
    pub fn embed(&self, inputs: &[&[u32]], pooling: Pooling, normalize_p: i32) -> Result<Vec<Vec<f32>>, EngineError> {
        self.embed_between(inputs, pooling, normalize_p, &mut || true)
    }

    fn embed_between(&self, inputs: &[&[u32]], pooling: Pooling, normalize_p: i32, between: &mut dyn FnMut() -> bool) -> Result<Vec<Vec<f32>>, EngineError> {
        let positions: Vec<Vec<usize>> = inputs
            .iter()
            .map(|t| match pooling {
                Pooling::Mean => (0..t.len()).collect(),
                Pooling::Cls => vec![0],
                Pooling::Last => vec![t.len().saturating_sub(1)],
            })
            .collect();
        let windows: Vec<(&[u32], &[usize])> = inputs.iter().zip(&positions).map(|(t, p)| (*t, p.as_slice())).collect();
        let mut out = Vec::with_capacity(inputs.len());
        let mut start = 0;
        while start < windows.len() {
            let mut end = start + 1;
            let mut tokens = windows[start].0.len();
            while end < windows.len() && end - start < GROUP_INPUTS && tokens + windows[end].0.len() <= GROUP_TOKENS {
                tokens += windows[end].0.len();
                end += 1;
            }
            if !between() {
                return Err(EngineError::Cancelled);
            }
            for r in self.prefill_windows(&windows[start..end])? {
                let e = r.n_embd;
                let mut v: Vec<f32> = (0..e).map(|j| (0..r.n_rows).map(|i| r.data[i * e + j] as f64).sum::<f64>() / r.n_rows as f64).map(|x| x as f32).collect();
                normalize(&mut v, normalize_p);
                out.push(v);
            }
            start = end;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisations_follow_their_definitions() {
        let v = [3.0f32, -4.0, 0.0];
        let with = |p| {
            let mut x = v;
            normalize(&mut x, p);
            x
        };
        assert_eq!(with(-1), v);
        assert_eq!(with(2), [0.6, -0.8, 0.0]);
        // the scale is 1 / norm rounded to f32, then multiplied in
        let s7 = (1.0f64 / 7.0) as f32;
        assert_eq!(with(1), [3.0 * s7, -4.0 * s7, 0.0]);
        let s0 = (32760.0f64 / 4.0) as f32;
        assert_eq!(with(0), [3.0 * s0, -4.0 * s0, 0.0]);
        let l3 = with(3).iter().map(|x| (x.abs() as f64).powi(3)).sum::<f64>();
        assert!((l3 - 1.0).abs() < 1e-6, "{l3}");
        // a large p: the p-norm tends to the largest magnitude (not 0 from underflow)
        for p in [300, i32::MAX] {
            let x = with(p);
            assert!((x[0] - 0.75).abs() < 1e-6 && (x[1] + 1.0).abs() < 1e-6 && x[2] == 0.0, "p {p}: {x:?}");
        }
        let mut zero = [0f32; 4];
        normalize(&mut zero, 2);
        assert_eq!(zero, [0.0; 4]);
    }

    #[test]
    fn requests_parse_their_input_forms_and_refuse_bad_ones() {
        use crate::Prompt;
        let r = EmbedRequest::from_json(r#"{"input": "hi"}"#).unwrap();
        assert_eq!((r.input, r.pooling, r.normalize), (vec![Prompt::Text("hi".into())], None, 2));
        let r = EmbedRequest::from_json(r#"{"input": [1, 2], "pooling": "last", "normalize": -1}"#).unwrap();
        assert_eq!((r.input, r.pooling, r.normalize), (vec![Prompt::Tokens(vec![1, 2])], Some(Pooling::Last), -1));
        let r = EmbedRequest::from_json(r#"{"input": ["a", [3], "b"]}"#).unwrap();
        assert_eq!(r.input, vec![Prompt::Text("a".into()), Prompt::Tokens(vec![3]), Prompt::Text("b".into())]);
        for (json, phrase) in [
            (r#"{"input": []}"#, "no tokens"),
            (r#"{"input": ""}"#, "empty text"),
            (r#"{"input": ["a", []]}"#, "no tokens"),
            (r#"{"input": 5}"#, "input must be"),
            (r#"{"input": [{"prefix": "a", "suffix": "b"}]}"#, "input must be"),
            (r#"{"input": "a", "normalize": -2}"#, "normalize"),
            (r#"{"input": "a", "pooling": "rank"}"#, "unknown variant"),
            (r#"{"input": "a", "bogus": 1}"#, "unknown field"),
        ] {
            let e = EmbedRequest::from_json(json).unwrap_err();
            assert!(e.contains(phrase), "{json}: {e}");
        }
    }

    #[test]
    fn pooling_names_round_trip_and_others_are_refused() {
        for p in [Pooling::Mean, Pooling::Cls, Pooling::Last] {
            assert_eq!(Pooling::parse(p.name()), Ok(p));
        }
        assert!(Pooling::parse("rank").unwrap_err().contains("mean, cls or last"));
    }
}
