//! Conditional (masked) perplexity over caller-supplied logits (SPEC §6).
//!
//! Given `logits[B][T][V]`, `target_ids[B][T]` and `response_mask[B][T]`, already aligned (no shift):
//! `NLL = -(1/M) * sum_i m_i * log softmax(logits_i)[x_i]`, `M = sum_i m_i`, `PPL = exp(NLL)`.
//! The average is over selected tokens, not over sequences. Nothing selected gives NLL 0 and
//! perplexity 1; an NLL too large to exponentiate (above ~709.78) gives perplexity `inf`.
//!
//! Every row is reduced with a stable log-sum-exp in `f64`, and sums are accumulated in `f64`,
//! whatever the logits' element type.

/// Result of [`conditional_perplexity`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConditionalPerplexity {
    /// Mean negative log-likelihood in nats over the selected tokens (0 when none are selected).
    pub negative_log_likelihood: f64,
    /// `exp(negative_log_likelihood)`; `inf` when that overflows, 1 when nothing is selected.
    pub perplexity: f64,
    /// Number of selected tokens (`sum(mask)`).
    pub selected_token_count: usize,
}

/// A bad argument to [`conditional_perplexity`]. The message names the argument
/// (`logits`, `target_ids` or `response_mask`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConditionalError {
    #[error("{argument}: shape mismatch: {message}")]
    Shape {
        argument: &'static str,
        message: String,
    },
    #[error("target_ids: id {id} at [{batch}][{position}] is outside [0, {n_vocab})")]
    TargetOutOfRange {
        id: String,
        batch: usize,
        position: usize,
        n_vocab: usize,
    },
    #[error("logits: non-finite value {value} in selected row [{batch}][{position}] (vocabulary index {index})")]
    NonFinite {
        value: f64,
        batch: usize,
        position: usize,
        index: usize,
    },
    #[error("response_mask: value {value} at [{batch}][{position}] is not 0/1 (or false/true)")]
    BadMask {
        value: String,
        batch: usize,
        position: usize,
    },
}

impl ConditionalError {
    /// The argument the error is about: `"logits"`, `"target_ids"` or `"response_mask"`.
    pub fn argument(&self) -> &'static str {
        match self {
            ConditionalError::Shape { argument, .. } => argument,
            ConditionalError::TargetOutOfRange { .. } => "target_ids",
            ConditionalError::NonFinite { .. } => "logits",
            ConditionalError::BadMask { .. } => "response_mask",
        }
    }
}

/// A logit element type: converted exactly to `f64` before any arithmetic.
/// (For `f16`/`bf16` logits, widen to `f32` first: that conversion is exact.)
pub trait LogitValue: Copy {
    fn to_f64(self) -> f64;
}
impl LogitValue for f32 {
    fn to_f64(self) -> f64 {
        self as f64
    }
}
impl LogitValue for f64 {
    fn to_f64(self) -> f64 {
        self
    }
}

/// A mask element type: `Some(true)` = selected, `Some(false)` = not, `None` = invalid value.
pub trait MaskValue: Copy + std::fmt::Display {
    fn flag(self) -> Option<bool>;
}
impl MaskValue for bool {
    fn flag(self) -> Option<bool> {
        Some(self)
    }
}
macro_rules! int_mask {
    ($($t:ty),*) => {$(
        impl MaskValue for $t {
            fn flag(self) -> Option<bool> {
                match self { 0 => Some(false), 1 => Some(true), _ => None }
            }
        }
    )*};
}
int_mask!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize);

/// Conditional perplexity of the selected tokens (SPEC §6).
///
/// `logits` is `b * t * v` values, row-major (`[b][t][v]`); `target_ids` and `mask` are `b * t`
/// values each (`[b][t]`). Target ids are checked at every position (selected or not); logits are
/// checked for finiteness in selected rows only.
pub fn conditional_perplexity<L, I, M>(
    logits: &[L],
    b: usize,
    t: usize,
    v: usize,
    target_ids: &[I],
    mask: &[M],
) -> Result<ConditionalPerplexity, ConditionalError>
where
    L: LogitValue,
    I: Copy + TryInto<i64> + std::fmt::Display,
    M: MaskValue,
{
    let rows = b.checked_mul(t).ok_or_else(|| ConditionalError::Shape {
        argument: "logits",
        message: format!("B*T overflows ({b} x {t})"),
    })?;
    let n_logits = rows.checked_mul(v).ok_or_else(|| ConditionalError::Shape {
        argument: "logits",
        message: format!("B*T*V overflows ({b} x {t} x {v})"),
    })?;
    if logits.len() != n_logits {
        return Err(ConditionalError::Shape {
            argument: "logits",
            message: format!(
                "expected B*T*V = {b}*{t}*{v} = {n_logits} values, got {}",
                logits.len()
            ),
        });
    }
    if target_ids.len() != rows {
        return Err(ConditionalError::Shape {
            argument: "target_ids",
            message: format!(
                "expected B*T = {b}*{t} = {rows} values, got {}",
                target_ids.len()
            ),
        });
    }
    if mask.len() != rows {
        return Err(ConditionalError::Shape {
            argument: "response_mask",
            message: format!("expected B*T = {b}*{t} = {rows} values, got {}", mask.len()),
        });
    }

    let at = |i: usize| (i.checked_div(t).unwrap_or(0), i.checked_rem(t).unwrap_or(0));

    // Validate the mask everywhere and the ids everywhere before any arithmetic.
    let mut selected = Vec::with_capacity(rows);
    for (i, &m) in mask.iter().enumerate() {
        match m.flag() {
            Some(f) => selected.push(f),
            None => {
                let (batch, position) = at(i);
                return Err(ConditionalError::BadMask {
                    value: m.to_string(),
                    batch,
                    position,
                });
            }
        }
    }
    let mut ids = Vec::with_capacity(rows);
    for (i, &x) in target_ids.iter().enumerate() {
        let id = x
            .try_into()
            .ok()
            .filter(|&id: &i64| id >= 0 && (id as u64) < v as u64);
        match id {
            Some(id) => ids.push(id as usize),
            None => {
                let (batch, position) = at(i);
                return Err(ConditionalError::TargetOutOfRange {
                    id: x.to_string(),
                    batch,
                    position,
                    n_vocab: v,
                });
            }
        }
    }

    let mut nll_sum = 0.0f64;
    let mut count = 0usize;
    for i in 0..rows {
        if !selected[i] {
            continue;
        }
        let row = &logits[i * v..(i + 1) * v];
        let mut max = f64::NEG_INFINITY;
        for (j, &x) in row.iter().enumerate() {
            let x = x.to_f64();
            if !x.is_finite() {
                let (batch, position) = at(i);
                return Err(ConditionalError::NonFinite {
                    value: x,
                    batch,
                    position,
                    index: j,
                });
            }
            if x > max {
                max = x;
            }
        }
        let sum_exp: f64 = row.iter().map(|&x| (x.to_f64() - max).exp()).sum();
        let log_sum_exp = max + sum_exp.ln();
        nll_sum += log_sum_exp - row[ids[i]].to_f64();
        count += 1;
    }

    if count == 0 {
        return Ok(ConditionalPerplexity {
            negative_log_likelihood: 0.0,
            perplexity: 1.0,
            selected_token_count: 0,
        });
    }
    let nll = nll_sum / count as f64;
    Ok(ConditionalPerplexity {
        negative_log_likelihood: nll,
        perplexity: nll.exp(),
        selected_token_count: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    #[allow(clippy::approx_constant)] // the SPEC's printed value, not ln 2
    fn spec_example_uniform_two_selected() {
        let logits = [0.0f64; 6];
        let r =
            conditional_perplexity(&logits, 1, 3, 2, &[0i64, 1, 0], &[false, true, true]).unwrap();
        assert!(close(r.negative_log_likelihood, 0.693147, 1e-6), "{r:?}");
        assert!(close(r.perplexity, 2.0, 1e-6), "{r:?}");
        assert_eq!(r.selected_token_count, 2);
    }

    #[test]
    fn spec_example_one_selected() {
        let logits = [4.0f32, 0.0, 0.0, 4.0, 9.0, -9.0, -9.0, 9.0];
        let r =
            conditional_perplexity(&logits, 1, 4, 2, &[0i64, 1, 1, 0], &[0u8, 1, 0, 0]).unwrap();
        // SPEC: 0.01815, 1.018316 (given to 5-6 significant digits; ln(1 + e^-4) = 0.0181499...).
        assert!(close(r.negative_log_likelihood, 0.01815, 1e-6), "{r:?}");
        assert!(close(r.perplexity, 1.018316, 1e-6), "{r:?}");
        assert_eq!(r.selected_token_count, 1);
    }

    #[test]
    fn spec_example_nothing_selected() {
        let logits = [1.0f64, -1.0, 2.0, -2.0];
        let r = conditional_perplexity(&logits, 1, 2, 2, &[0i64, 1], &[false, false]).unwrap();
        assert_eq!(
            r,
            ConditionalPerplexity {
                negative_log_likelihood: 0.0,
                perplexity: 1.0,
                selected_token_count: 0
            }
        );
    }

    #[test]
    fn average_is_over_tokens_not_sequences() {
        // Sequence 0 has one selected token, logits [ln 3, 0, 0, 0] → p(0) = 3/6, NLL ln 2;
        // sequence 1 has two, uniform rows → NLL ln 4 each. Mean over 3 tokens, not over 2 sequences.
        let l3 = 3f64.ln();
        let mut logits = vec![0.0f64; 2 * 2 * 4];
        logits[0..4].copy_from_slice(&[l3, 0.0, 0.0, 0.0]); // [0][0], target 0 → ln 2
                                                            // [1][0], [1][1] uniform → ln 4 each
        let r =
            conditional_perplexity(&logits, 2, 2, 4, &[0u32, 0, 2, 3], &[1i32, 0, 1, 1]).unwrap();
        let expect = (2f64.ln() + 2.0 * 4f64.ln()) / 3.0;
        assert!(
            close(r.negative_log_likelihood, expect, 1e-12),
            "{r:?} vs {expect}"
        );
        assert_eq!(r.selected_token_count, 3);
    }

    /// Independent reference: -log p_t = log(sum_j exp(x_j - x_t)), built by pairwise log-add
    /// (a different formulation from the max-shift used by the code under test).
    fn reference_nll(row: &[f64], target: usize) -> f64 {
        // -log p = log(sum_j exp(x_j - x_t)) = log(1 + sum_{j != t} exp(x_j - x_t)), arranged to avoid overflow.
        let xt = row[target];
        // Fold log(exp(acc) + exp(d)) one entry at a time (log-add with ln_1p).
        let mut acc = f64::NEG_INFINITY;
        for &x in row {
            let d = x - xt;
            acc = if acc == f64::NEG_INFINITY {
                d
            } else if acc > d {
                acc + (d - acc).exp().ln_1p()
            } else {
                d + (acc - d).exp().ln_1p()
            };
        }
        acc
    }

    #[test]
    fn large_logits_are_stable() {
        // Deterministic pseudo-random logits at scale 3000 (a naive exp would overflow).
        let (b, t, v) = (2usize, 5usize, 7usize);
        let mut state = 0x2545F4914F6CDD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let logits: Vec<f64> = (0..b * t * v)
            .map(|_| (next() * 2.0 - 1.0) * 3000.0)
            .collect();
        let ids: Vec<i64> = (0..b * t).map(|i| ((i * 3) % v) as i64).collect();
        let mask: Vec<bool> = (0..b * t).map(|i| i % 3 != 1).collect();
        let r = conditional_perplexity(&logits, b, t, v, &ids, &mask).unwrap();
        let mut sum = 0.0;
        let mut n = 0;
        for i in 0..b * t {
            if mask[i] {
                sum += reference_nll(&logits[i * v..(i + 1) * v], ids[i] as usize);
                n += 1;
            }
        }
        let expect = sum / n as f64;
        assert!(r.negative_log_likelihood.is_finite());
        assert!(
            close(
                r.negative_log_likelihood,
                expect,
                1e-9 * expect.abs().max(1.0)
            ),
            "{r:?} vs {expect}"
        );
        assert_eq!(r.selected_token_count, n);
        // Such NLLs exceed ~709: perplexity overflows to inf, which is not an error.
        if expect > 710.0 {
            assert!(r.perplexity.is_infinite());
        }
    }

    #[test]
    fn huge_nll_gives_infinite_perplexity() {
        let logits = [3000.0f32, -3000.0];
        let r = conditional_perplexity(&logits, 1, 1, 2, &[1i64], &[true]).unwrap();
        assert!(close(r.negative_log_likelihood, 6000.0, 1e-9));
        assert_eq!(r.perplexity, f64::INFINITY);
    }

    #[test]
    fn errors_name_the_argument() {
        let l = [0.0f64; 4];
        let e = conditional_perplexity(&l[..3], 1, 2, 2, &[0i64, 1], &[true, true]).unwrap_err();
        assert_eq!(e.argument(), "logits");
        assert!(e.to_string().starts_with("logits"));
        let e = conditional_perplexity(&l, 1, 2, 2, &[0i64], &[true, true]).unwrap_err();
        assert_eq!(e.argument(), "target_ids");
        let e = conditional_perplexity(&l, 1, 2, 2, &[0i64, 1], &[true]).unwrap_err();
        assert_eq!(e.argument(), "response_mask");
        let e = conditional_perplexity(&l, 1, 2, 2, &[0i64, 2], &[true, false]).unwrap_err();
        assert_eq!(e.argument(), "target_ids");
        assert!(e.to_string().contains("target_ids"));
        let e = conditional_perplexity(&l, 1, 2, 2, &[-1i64, 0], &[true, false]).unwrap_err();
        assert_eq!(e.argument(), "target_ids");
        let e = conditional_perplexity(&l, 1, 2, 2, &[u64::MAX, 0], &[true, false]).unwrap_err();
        assert_eq!(e.argument(), "target_ids");
        let e = conditional_perplexity(&l, 1, 2, 2, &[0i64, 1], &[1i64, 2]).unwrap_err();
        assert_eq!(e.argument(), "response_mask");
        assert!(e.to_string().contains("response_mask"));
        let bad = [0.0f32, f32::NAN, 1.0, 1.0];
        let e = conditional_perplexity(&bad, 1, 2, 2, &[0i64, 1], &[1u8, 1]).unwrap_err();
        assert_eq!(e.argument(), "logits");
        assert!(e.to_string().contains("logits"));
        let bad = [0.0f64, 0.0, f64::INFINITY, 1.0];
        assert!(conditional_perplexity(&bad, 1, 2, 2, &[0i64, 1], &[1u8, 1]).is_err());
        // Non-finite values in unselected rows are ignored.
        let r = conditional_perplexity(&bad, 1, 2, 2, &[0i64, 1], &[1u8, 0]).unwrap();
        assert!(close(r.negative_log_likelihood, 2f64.ln(), 1e-12));
    }

    #[test]
    fn empty_batch() {
        let l: [f32; 0] = [];
        let r = conditional_perplexity(&l, 0, 3, 5, &[] as &[i64], &[] as &[bool]).unwrap();
        assert_eq!(r.selected_token_count, 0);
        assert_eq!(r.perplexity, 1.0);
    }
}
