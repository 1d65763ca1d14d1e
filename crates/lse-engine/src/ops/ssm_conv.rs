//! Short causal depthwise convolution over time (the `ssm_conv1d` step of a gated delta net layer).
//!
//! Every channel has its own `kernel` taps. Output row `t` of channel `c` is
//! `sum_j w[c][j] * x[t - (kernel-1) + j][c]`, so tap `kernel-1` multiplies the current token and
//! tap 0 the oldest one. Inputs before the first token of a call come from a carried state that
//! holds the last `kernel-1` input rows of the previous call (all zeros for a fresh sequence), so
//! a sequence can be processed in any split of calls with the same result.
//!
//! Layouts (all row-major f32):
//! * `x`, `out`: `n_tokens` rows of `channels`.
//! * `weight`: `channels` rows of `kernel` taps (ggml's `ssm_conv1d.weight`, ne = [kernel, channels]).
//! * `state`: `kernel-1` rows of `channels`, oldest first.

/// Floats in the carried state of one layer.
pub fn conv_state_len(kernel: usize, channels: usize) -> usize {
    kernel.saturating_sub(1) * channels
}

/// Causal depthwise conv over the rows of `x`, updating `state` to the last `kernel-1` inputs.
pub fn causal_conv1d(x: &[f32], channels: usize, weight: &[f32], kernel: usize, state: &mut [f32], out: &mut [f32]) {
    assert!(kernel >= 1 && channels > 0, "conv needs kernel >= 1 and channels > 0");
    assert!(x.len().is_multiple_of(channels), "conv input is not whole rows");
    let n = x.len() / channels;
    let hist = kernel - 1;
    assert_eq!(weight.len(), kernel * channels, "conv weight size");
    assert_eq!(state.len(), hist * channels, "conv state size");
    assert_eq!(out.len(), x.len(), "conv output size");

    // The row at virtual time `t - hist + j` (j in 0..kernel) of the concatenation [state; x].
    let row = |s: usize| -> &[f32] {
        if s < hist {
            &state[s * channels..(s + 1) * channels]
        } else {
            &x[(s - hist) * channels..(s - hist + 1) * channels]
        }
    };
    for t in 0..n {
        let o = &mut out[t * channels..(t + 1) * channels];
        for (c, oc) in o.iter_mut().enumerate() {
            let w = &weight[c * kernel..(c + 1) * kernel];
            let mut acc = 0.0f32;
            for (j, wj) in w.iter().enumerate() {
                acc += wj * row(t + j)[c];
            }
            *oc = acc;
        }
    }

    // New state: the last `hist` rows of [state; x].
    if hist > 0 {
        let total = hist + n;
        let mut next = vec![0.0f32; hist * channels];
        for r in 0..hist {
            let s = total - hist + r;
            next[r * channels..(r + 1) * channels].copy_from_slice(row(s));
        }
        state.copy_from_slice(&next);
    }
}

/// x * sigmoid(x), in place.
pub fn silu_in_place(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v /= 1.0 + (-*v).exp();
    }
}

/// [`causal_conv1d`] followed by SiLU (what a qwen35 GDN layer feeds into the delta rule).
pub fn causal_conv1d_silu(x: &[f32], channels: usize, weight: &[f32], kernel: usize, state: &mut [f32], out: &mut [f32]) {
    causal_conv1d(x, channels, weight, kernel, state, out);
    silu_in_place(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rand_vec(seed: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((*seed >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) as f32
            })
            .collect()
    }

    /// Direct float64 conv: zero history, sum over taps with explicit index arithmetic.
    fn conv_f64(x: &[f32], ch: usize, w: &[f32], k: usize, silu: bool) -> Vec<f64> {
        let n = x.len() / ch;
        let mut y = vec![0.0f64; n * ch];
        for t in 0..n {
            for c in 0..ch {
                let mut s = 0.0f64;
                for lag in 0..k {
                    // lag 0 = current token, uses the last tap
                    if t >= lag {
                        s += w[c * k + (k - 1 - lag)] as f64 * x[(t - lag) * ch + c] as f64;
                    }
                }
                y[t * ch + c] = if silu { s / (1.0 + (-s).exp()) } else { s };
            }
        }
        y
    }

    #[test]
    fn conv_matches_direct_f64() {
        let mut seed = 7;
        let (n, ch, k) = (11, 5, 4);
        let x = rand_vec(&mut seed, n * ch);
        let w = rand_vec(&mut seed, ch * k);
        for silu in [false, true] {
            let mut st = vec![0.0; conv_state_len(k, ch)];
            let mut out = vec![0.0; n * ch];
            if silu {
                causal_conv1d_silu(&x, ch, &w, k, &mut st, &mut out);
            } else {
                causal_conv1d(&x, ch, &w, k, &mut st, &mut out);
            }
            let r = conv_f64(&x, ch, &w, k, silu);
            for (a, b) in out.iter().zip(&r) {
                assert!((*a as f64 - b).abs() < 1e-5, "{a} vs {b}");
            }
            // state = last k-1 inputs
            assert_eq!(&st[..], &x[(n - (k - 1)) * ch..]);
        }
    }

    #[test]
    fn conv_chunk_invariant() {
        let mut seed = 99;
        let (n, ch, k) = (13, 6, 4);
        let x = rand_vec(&mut seed, n * ch);
        let w = rand_vec(&mut seed, ch * k);
        let mut st = vec![0.0; conv_state_len(k, ch)];
        let mut whole = vec![0.0; n * ch];
        causal_conv1d_silu(&x, ch, &w, k, &mut st, &mut whole);
        // splits include pieces shorter than the history (1 and 2 tokens)
        for splits in [vec![1, 2, 10], vec![4, 4, 5], vec![2, 1, 1, 9], vec![13]] {
            let mut st2 = vec![0.0; conv_state_len(k, ch)];
            let mut parts = vec![0.0; n * ch];
            let mut t0 = 0;
            for len in splits {
                let r = t0 * ch..(t0 + len) * ch;
                causal_conv1d_silu(&x[r.clone()], ch, &w, k, &mut st2, &mut parts[r]);
                t0 += len;
            }
            assert_eq!(parts, whole);
            assert_eq!(st2, st);
        }
    }

    #[test]
    fn kernel_one_has_no_state() {
        let x = [1.0f32, -2.0, 3.0, 0.5];
        let w = [2.0f32, -1.0];
        let mut st: Vec<f32> = vec![];
        let mut out = [0.0f32; 4];
        causal_conv1d(&x, 2, &w, 1, &mut st, &mut out);
        assert_eq!(out, [2.0, 2.0, 6.0, -0.5]);
    }
}
