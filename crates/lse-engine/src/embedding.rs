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
/// taxicab). The norm is summed in f64; an all-zero vector stays zero.
pub fn normalize(v: &mut [f32], p: i32) {
    let norm = match p {
        -1 => return,
        0 => v.iter().fold(0f64, |m, &x| m.max(x.abs() as f64)) / 32760.0,
        2 => v.iter().map(|&x| x as f64 * x as f64).sum::<f64>().sqrt(),
        _ => v.iter().map(|&x| (x.abs() as f64).powi(p)).sum::<f64>().powf(1.0 / p as f64),
    };
    let scale = if norm > 0.0 { (1.0 / norm) as f32 } else { 0.0 };
    v.iter_mut().for_each(|x| *x *= scale);
}

impl Engine {
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
        let positions: Vec<Vec<usize>> = inputs
            .iter()
            .map(|t| match pooling {
                Pooling::Mean => (0..t.len()).collect(),
                Pooling::Cls => vec![0],
                Pooling::Last => vec![t.len().saturating_sub(1)],
            })
            .collect();
        let windows: Vec<(&[u32], &[usize])> = inputs.iter().zip(&positions).map(|(t, p)| (*t, p.as_slice())).collect();
        let rows = self.prefill_windows(&windows)?;
        Ok(rows
            .iter()
            .map(|r| {
                let e = r.n_embd;
                let mut v: Vec<f32> = (0..e).map(|j| (0..r.n_rows).map(|i| r.data[i * e + j] as f64).sum::<f64>() / r.n_rows as f64).map(|x| x as f32).collect();
                normalize(&mut v, normalize_p);
                v
            })
            .collect())
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
        let mut zero = [0f32; 4];
        normalize(&mut zero, 2);
        assert_eq!(zero, [0.0; 4]);
    }

    #[test]
    fn pooling_names_round_trip_and_others_are_refused() {
        for p in [Pooling::Mean, Pooling::Cls, Pooling::Last] {
            assert_eq!(Pooling::parse(p.name()), Ok(p));
        }
        assert!(Pooling::parse("rank").unwrap_err().contains("mean, cls or last"));
    }
}
