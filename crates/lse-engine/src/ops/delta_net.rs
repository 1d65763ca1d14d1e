//! The gated delta rule (the recurrent core of Qwen3.5 / Qwen3-Next linear-attention layers) and
//! the small element-wise steps around it, as pure functions over f32 slices.
//!
//! Per value head `h` (which reads key head `h % n_k_heads`, "tiled"), with a recurrent state
//! `S` of `d_k x d_v` and for each token in order:
//!
//! ```text
//! S <- S * exp(g)                       g = softplus(alpha + dt_bias) * a   (a < 0, so 0 < exp(g) < 1)
//! S <- S + k (v - S^T k)^T * beta       beta = sigmoid(beta_raw)
//! o  = S^T q * scale                    scale = 1/sqrt(d_k); q, k L2-normalised per head
//! ```
//!
//! State memory layout: `[v_head][j: value dim][i: key dim]`, i.e. `S^T` row-major, so that both
//! `S^T k` and `S^T q` are contiguous dot products. A zeroed state is a fresh sequence. Because
//! the state carries everything, processing a sequence in one call or in several consecutive calls
//! gives the same outputs.

use crate::ops::act::{sigmoid, silu};

/// Head geometry of a gated delta net layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GdnShape {
    /// Query/key heads (`ssm.group_count`).
    pub n_k_heads: usize,
    /// Value heads (`ssm.time_step_rank`); a multiple of `n_k_heads`.
    pub n_v_heads: usize,
    /// Query/key head dim (`ssm.state_size`).
    pub d_k: usize,
    /// Value head dim (`ssm.inner_size / n_v_heads`).
    pub d_v: usize,
}

impl GdnShape {
    /// Floats in the recurrent state of one layer.
    pub fn state_len(&self) -> usize {
        self.n_v_heads * self.d_k * self.d_v
    }
    /// Width of the q (and of the k) part of a row.
    pub fn qk_width(&self) -> usize {
        self.n_k_heads * self.d_k
    }
    /// Width of the v part of a row (= output row width).
    pub fn v_width(&self) -> usize {
        self.n_v_heads * self.d_v
    }
    /// Key head read by value head `h`: tiled (`h % n_k_heads`), as Qwen3.5 repeats key heads.
    pub fn key_head(&self, h: usize) -> usize {
        h % self.n_k_heads
    }
    fn check(&self) {
        assert!(self.n_k_heads > 0 && self.d_k > 0 && self.d_v > 0, "empty GDN shape");
        assert!(self.n_v_heads.is_multiple_of(self.n_k_heads), "value heads must be a multiple of key heads");
    }
}

/// Row views of q, k, v for a run of tokens. Each of `q`, `k`, `v` starts at its first element
/// in row 0 and steps `stride` floats per token, so q/k/v may be parts of one packed row
/// (`[q | k | v]` as the conv produces) or separate arrays (stride = their own width).
/// `g` and `beta` hold `n_v_heads` floats per token (already transformed, see [`gdn_gates`]).
#[derive(Clone, Copy)]
pub struct GdnInputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub stride: usize,
    pub g: &'a [f32],
    pub beta: &'a [f32],
}

/// ggml's softplus: `log(1 + exp(x))`, and `x` itself above 20.
#[inline]
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 {
        x
    } else {
        (1.0 + x.exp()).ln()
    }
}


/// In place, `n_v_heads` per token: `beta <- sigmoid(beta)`,
/// `alpha <- softplus(alpha + dt_bias) * a` (the log-decay `g`).
pub fn gdn_gates(beta: &mut [f32], alpha: &mut [f32], dt_bias: &[f32], a: &[f32]) {
    let h = dt_bias.len();
    assert!(h > 0 && a.len() == h, "gdn gates: dt_bias / a sizes");
    assert!(beta.len() == alpha.len() && alpha.len().is_multiple_of(h), "gdn gates: row sizes");
    for b in beta.iter_mut() {
        *b = sigmoid(*b);
    }
    for row in alpha.chunks_exact_mut(h) {
        for ((x, bias), ah) in row.iter_mut().zip(dt_bias).zip(a) {
            *x = softplus(*x + bias) * ah;
        }
    }
}

/// `x / max(||x||_2, eps)` over each consecutive group of `d` floats (ggml's `l2_norm`: sum of
/// squares accumulated in f64, eps a floor on the norm).
pub fn l2_normalize(x: &mut [f32], d: usize, eps: f32) {
    assert!(d > 0 && x.len().is_multiple_of(d), "l2 norm: not whole groups");
    for grp in x.chunks_exact_mut(d) {
        let sum: f64 = grp.iter().map(|&v| (v * v) as f64).sum();
        let scale = 1.0 / (sum.sqrt() as f32).max(eps);
        for v in grp.iter_mut() {
            *v *= scale;
        }
    }
}

/// Gated RMSNorm over each group of `d` floats: `o <- rmsnorm(o) * w * silu(z)`,
/// `rmsnorm(o) = o / sqrt(mean(o^2) + eps)`; `w` has `d` floats, `z` is laid out like `o`.
pub fn gated_rms_norm(o: &mut [f32], z: &[f32], w: &[f32], eps: f32) {
    let d = w.len();
    assert!(d > 0 && o.len().is_multiple_of(d) && z.len() == o.len(), "gated norm sizes");
    for (og, zg) in o.chunks_exact_mut(d).zip(z.chunks_exact(d)) {
        let sum: f64 = og.iter().map(|&v| (v * v) as f64).sum();
        let mean = (sum / d as f64) as f32;
        let scale = 1.0 / (mean + eps).sqrt();
        for ((ov, wv), zv) in og.iter_mut().zip(w).zip(zg) {
            *ov = (*ov * scale) * wv * silu(*zv);
        }
    }
}

/// Runs the gated delta rule for value head `h` over `n_tokens` tokens, updating that head's
/// state (`d_v x d_k` floats, see the module docs) and writing `d_v` floats per token to
/// `out[t * out_stride ..]`.
pub fn gated_delta_rule_head(
    shape: &GdnShape,
    h: usize,
    inp: &GdnInputs<'_>,
    n_tokens: usize,
    state_h: &mut [f32],
    out: &mut [f32],
    out_stride: usize,
) {
    let (dk, dv) = (shape.d_k, shape.d_v);
    assert_eq!(state_h.len(), dk * dv, "gdn head state size");
    let hk = shape.key_head(h);
    let scale = 1.0 / (dk as f32).sqrt();
    let mut qs = vec![0.0f32; dk];
    for t in 0..n_tokens {
        let q = &inp.q[t * inp.stride + hk * dk..][..dk];
        let k = &inp.k[t * inp.stride + hk * dk..][..dk];
        let v = &inp.v[t * inp.stride + h * dv..][..dv];
        let decay = inp.g[t * shape.n_v_heads + h].exp();
        let beta = inp.beta[t * shape.n_v_heads + h];
        for (a, b) in qs.iter_mut().zip(q) {
            *a = b * scale;
        }
        let o = &mut out[t * out_stride..][..dv];
        for (j, row) in state_h.chunks_exact_mut(dk).enumerate() {
            // decay, then (S^T k)_j
            let mut kv = 0.0f32;
            for (s, kk) in row.iter_mut().zip(k) {
                *s *= decay;
                kv += *s * kk;
            }
            let delta = (v[j] - kv) * beta;
            // rank-1 update, then (S^T q)_j
            let mut acc = 0.0f32;
            for ((s, kk), qq) in row.iter_mut().zip(k).zip(&qs) {
                *s += kk * delta;
                acc += *s * qq;
            }
            o[j] = acc;
        }
    }
}

/// The gated delta rule over all value heads: `state` is `shape.state_len()` floats, `out` is
/// `n_tokens` rows of `shape.v_width()`.
pub fn gated_delta_rule(shape: &GdnShape, inp: &GdnInputs<'_>, n_tokens: usize, state: &mut [f32], out: &mut [f32]) {
    shape.check();
    assert_eq!(state.len(), shape.state_len(), "gdn state size");
    let vw = shape.v_width();
    assert!(out.len() >= n_tokens * vw, "gdn output size");
    if n_tokens == 0 {
        return;
    }
    let need = (n_tokens - 1) * inp.stride;
    assert!(inp.q.len() >= need + shape.qk_width(), "gdn q rows");
    assert!(inp.k.len() >= need + shape.qk_width(), "gdn k rows");
    assert!(inp.v.len() >= need + vw, "gdn v rows");
    assert!(inp.g.len() >= n_tokens * shape.n_v_heads && inp.beta.len() >= n_tokens * shape.n_v_heads, "gdn gate rows");
    let per = shape.d_k * shape.d_v;
    for (h, st) in state.chunks_exact_mut(per).enumerate() {
        gated_delta_rule_head(shape, h, inp, n_tokens, st, &mut out[h * shape.d_v..], vw);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rand_vec(seed: &mut u64, n: usize, amp: f64) -> Vec<f32> {
        (0..n)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (((*seed >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) * amp) as f32
            })
            .collect()
    }

    struct Case {
        shape: GdnShape,
        n: usize,
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        g: Vec<f32>,
        beta: Vec<f32>,
    }

    fn case(seed: u64, shape: GdnShape, n: usize) -> Case {
        let mut s = seed;
        let mut q = rand_vec(&mut s, n * shape.qk_width(), 1.0);
        let mut k = rand_vec(&mut s, n * shape.qk_width(), 1.0);
        l2_normalize(&mut q, shape.d_k, 1e-6);
        l2_normalize(&mut k, shape.d_k, 1e-6);
        let v = rand_vec(&mut s, n * shape.v_width(), 1.0);
        let mut beta = rand_vec(&mut s, n * shape.n_v_heads, 3.0);
        let mut g = rand_vec(&mut s, n * shape.n_v_heads, 2.0);
        let dt_bias = rand_vec(&mut s, shape.n_v_heads, 1.0);
        let a: Vec<f32> = rand_vec(&mut s, shape.n_v_heads, 1.0).iter().map(|x| -(1.5 + x)).collect();
        gdn_gates(&mut beta, &mut g, &dt_bias, &a);
        Case { shape, n, q, k, v, g, beta }
    }

    /// Direct float64 delta rule in the textbook layout S[i (key)][j (value)], no shared code.
    fn reference(c: &Case) -> Vec<f64> {
        let GdnShape { n_k_heads, n_v_heads, d_k, d_v } = c.shape;
        let mut out = vec![0.0f64; c.n * n_v_heads * d_v];
        for h in 0..n_v_heads {
            let hk = h % n_k_heads;
            let mut s = vec![vec![0.0f64; d_v]; d_k];
            for t in 0..c.n {
                let q = |i: usize| c.q[t * n_k_heads * d_k + hk * d_k + i] as f64;
                let k = |i: usize| c.k[t * n_k_heads * d_k + hk * d_k + i] as f64;
                let v = |j: usize| c.v[t * n_v_heads * d_v + h * d_v + j] as f64;
                let g = c.g[t * n_v_heads + h] as f64;
                let beta = c.beta[t * n_v_heads + h] as f64;
                for row in s.iter_mut() {
                    for x in row.iter_mut() {
                        *x *= g.exp();
                    }
                }
                let mut delta = vec![0.0f64; d_v];
                for (j, dj) in delta.iter_mut().enumerate() {
                    let skj: f64 = (0..d_k).map(|i| s[i][j] * k(i)).sum();
                    *dj = (v(j) - skj) * beta;
                }
                for (i, row) in s.iter_mut().enumerate() {
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += k(i) * delta[j];
                    }
                }
                for j in 0..d_v {
                    let o: f64 = (0..d_k).map(|i| s[i][j] * q(i)).sum();
                    out[t * n_v_heads * d_v + h * d_v + j] = o / (d_k as f64).sqrt();
                }
            }
        }
        out
    }

    fn run(c: &Case, splits: &[usize]) -> (Vec<f32>, Vec<f32>) {
        let sh = c.shape;
        let mut state = vec![0.0f32; sh.state_len()];
        let mut out = vec![0.0f32; c.n * sh.v_width()];
        let mut t0 = 0;
        for &len in splits {
            // pack rows as the conv produces them: [q | k | v]
            let (qw, vw) = (sh.qk_width(), sh.v_width());
            let w = 2 * qw + vw;
            let mut packed = vec![0.0f32; len * w];
            for t in 0..len {
                let (src, r) = (t0 + t, &mut packed[t * w..(t + 1) * w]);
                r[..qw].copy_from_slice(&c.q[src * qw..][..qw]);
                r[qw..2 * qw].copy_from_slice(&c.k[src * qw..][..qw]);
                r[2 * qw..].copy_from_slice(&c.v[src * vw..][..vw]);
            }
            let pin = GdnInputs {
                q: &packed,
                k: &packed[qw..],
                v: &packed[2 * qw..],
                stride: w,
                g: &c.g[t0 * sh.n_v_heads..],
                beta: &c.beta[t0 * sh.n_v_heads..],
            };
            gated_delta_rule(&sh, &pin, len, &mut state, &mut out[t0 * sh.v_width()..(t0 + len) * sh.v_width()]);
            t0 += len;
        }
        assert_eq!(t0, c.n);
        (out, state)
    }

    const SHAPES: [GdnShape; 3] = [
        GdnShape { n_k_heads: 2, n_v_heads: 4, d_k: 16, d_v: 16 },
        GdnShape { n_k_heads: 1, n_v_heads: 3, d_k: 8, d_v: 5 },
        GdnShape { n_k_heads: 2, n_v_heads: 2, d_k: 4, d_v: 6 },
    ];

    #[test]
    fn delta_rule_matches_direct_f64() {
        for (i, sh) in SHAPES.iter().enumerate() {
            let c = case(11 + i as u64, *sh, 37);
            let (out, _) = run(&c, &[c.n]);
            let r = reference(&c);
            let mut max = 0.0f64;
            for (a, b) in out.iter().zip(&r) {
                max = max.max((*a as f64 - b).abs());
            }
            assert!(max < 2e-5, "shape {sh:?}: max abs diff {max}");
        }
    }

    #[test]
    fn delta_rule_chunk_invariant() {
        for (i, sh) in SHAPES.iter().enumerate() {
            let c = case(101 + i as u64, *sh, 40);
            let (whole, st) = run(&c, &[40]);
            for splits in [&[1usize, 1, 38][..], &[16, 16, 8], &[3, 7, 11, 19]] {
                let (parts, st2) = run(&c, splits);
                assert_eq!(parts, whole, "splits {splits:?}");
                assert_eq!(st2, st);
            }
        }
    }

    #[test]
    fn tiled_head_mapping() {
        // value head h reads key head h % n_k_heads: with 2 key heads and 4 value heads, heads 0
        // and 2 see the same q/k, so equal v/g/beta for them must give equal outputs.
        let sh = GdnShape { n_k_heads: 2, n_v_heads: 4, d_k: 4, d_v: 4 };
        let mut c = case(5, sh, 6);
        for t in 0..c.n {
            let vw = sh.v_width();
            let (h0, h2) = (t * vw, t * vw + 2 * sh.d_v);
            for j in 0..sh.d_v {
                c.v[h2 + j] = c.v[h0 + j];
            }
            c.g[t * 4 + 2] = c.g[t * 4];
            c.beta[t * 4 + 2] = c.beta[t * 4];
        }
        let (out, _) = run(&c, &[c.n]);
        for t in 0..c.n {
            let r = &out[t * sh.v_width()..];
            assert_eq!(&r[0..4], &r[8..12]);
            assert_ne!(&r[0..4], &r[4..8]);
        }
    }

    #[test]
    fn gates_and_norms_match_direct_f64() {
        let mut s = 3;
        let mut beta = rand_vec(&mut s, 8, 4.0);
        let mut alpha = rand_vec(&mut s, 8, 4.0);
        let (b0, a0) = (beta.clone(), alpha.clone());
        let dt = [0.5f32, -1.0];
        let a = [-2.0f32, -7.5];
        gdn_gates(&mut beta, &mut alpha, &dt, &a);
        for i in 0..8 {
            let x = a0[i] as f64 + dt[i % 2] as f64;
            let g = (1.0 + x.exp()).ln() * a[i % 2] as f64;
            assert!((alpha[i] as f64 - g).abs() < 1e-5);
            let b = 1.0 / (1.0 + (-(b0[i] as f64)).exp());
            assert!((beta[i] as f64 - b).abs() < 1e-6);
        }
        assert_eq!(softplus(30.0), 30.0);

        let mut x = rand_vec(&mut s, 12, 2.0);
        let x0 = x.clone();
        l2_normalize(&mut x, 4, 1e-6);
        for (grp, g0) in x.chunks(4).zip(x0.chunks(4)) {
            let n: f64 = g0.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt();
            for (a, b) in grp.iter().zip(g0) {
                assert!((*a as f64 - *b as f64 / n).abs() < 1e-6);
            }
        }
        let mut zero = vec![0.0f32; 4];
        l2_normalize(&mut zero, 4, 1e-6);
        assert_eq!(zero, vec![0.0; 4]);

        let mut o = rand_vec(&mut s, 12, 2.0);
        let o0 = o.clone();
        let z = rand_vec(&mut s, 12, 3.0);
        let w = [1.1f32, 0.9, 1.0, 1.2];
        gated_rms_norm(&mut o, &z, &w, 1e-6);
        for gi in 0..3 {
            let g0 = &o0[gi * 4..gi * 4 + 4];
            let ms: f64 = g0.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / 4.0;
            for j in 0..4 {
                let zz = z[gi * 4 + j] as f64;
                let want = g0[j] as f64 / (ms + 1e-6).sqrt() * w[j] as f64 * zz / (1.0 + (-zz).exp());
                assert!((o[gi * 4 + j] as f64 - want).abs() < 1e-5, "{} vs {want}", o[gi * 4 + j]);
            }
        }
    }
}
