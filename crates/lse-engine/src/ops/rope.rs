//! Rotary position embedding, ggml-style: angles `theta_i = pos * freq_scale * base^(-2i/n_rot)`
//! built by repeated f32 multiplication, rotating the first `n_rot` dims of every head.
//! `Norm` pairs adjacent dims (2i, 2i+1) (llama); `Neox` pairs (i, i + n_rot/2).

/// Which dims form a rotated pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeKind {
    Norm,
    Neox,
}

/// Rope settings of one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeParams {
    pub kind: RopeKind,
    /// Rotated dims per head (even, at most the head size).
    pub n_rot: usize,
    pub base: f32,
    /// Position multiplier (1 / linear scaling factor).
    pub freq_scale: f32,
    /// Optional per-pair frequency divisors (`rope_freqs.weight`), n_rot/2 of them.
    pub freq_factors: Option<Vec<f32>>,
    /// YaRN context extension (None: plain scaling).
    pub yarn: Option<Yarn>,
}

/// YaRN (ggml's `rope_yarn`): pair `i` blends the interpolated angle `freq_scale * theta` with the
/// original one by a ramp over the correction dims, and cos/sin are scaled by
/// `attn_factor * (1 + 0.1 ln(1 / freq_scale))`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    pub ext_factor: f32,
    pub attn_factor: f32,
    /// First and last pair index of the ramp (`ggml_rope_yarn_corr_dims`).
    pub corr_dims: [f32; 2],
}

impl Yarn {
    /// llama.cpp's setup for a file with `rope.scaling.type` yarn: ext_factor 1, beta_fast 32,
    /// beta_slow 1, and the attention factor that cancels the magnitude scaling's own log term.
    pub fn new(n_rot: usize, n_ctx_orig: usize, base: f32, freq_scale: f32, rope_attn_factor: f32) -> Yarn {
        Yarn::with(n_rot, n_ctx_orig, base, freq_scale, rope_attn_factor, [32.0, 1.0], 0.0)
    }

    /// As `new` with the file's `[beta_fast, beta_slow]` and `rope.scaling.yarn_log_multiplier`
    /// (`log_mul`, 0 for none: llama.cpp then divides the magnitude `0.1 ln(factor) + 1` by
    /// `0.1 log_mul ln(factor) + 1`, taking mscale as 1).
    pub fn with(n_rot: usize, n_ctx_orig: usize, base: f32, freq_scale: f32, rope_attn_factor: f32, betas: [f32; 2], log_mul: f32) -> Yarn {
        let corr_dim = |beta: f32| n_rot as f32 * (n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln());
        let factor = 1.0 / freq_scale;
        let mscale = |m: f32| if factor <= 1.0 { 1.0 } else { 0.1 * m * factor.ln() + 1.0 };
        let mut attn_factor = if log_mul != 0.0 { mscale(1.0) / mscale(log_mul) } else { mscale(1.0) };
        attn_factor *= 1.0 / (1.0 + 0.1 * factor.ln());
        attn_factor *= rope_attn_factor;
        Yarn {
            ext_factor: 1.0,
            attn_factor,
            corr_dims: [corr_dim(betas[0]).floor().max(0.0), corr_dim(betas[1]).ceil().min(n_rot as f32 - 1.0)],
        }
    }

    /// (cos, sin) of pair `i` whose unscaled angle is `theta_extrap`.
    fn cos_sin(&self, theta_extrap: f32, freq_scale: f32, i: usize) -> (f32, f32) {
        let theta_interp = freq_scale * theta_extrap;
        let mut theta = theta_interp;
        let mut mscale = self.attn_factor;
        if self.ext_factor != 0.0 {
            let [low, high] = self.corr_dims;
            let y = (i as f32 - low) / (high - low).max(0.001);
            let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor;
            theta = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0 + 0.1 * (1.0 / freq_scale).ln();
        }
        (theta.cos() * mscale, theta.sin() * mscale)
    }
}

/// Rotates the Q rows `q` (`n_tokens × n_q × head_dim`) and the K rows `k` (`n_tokens × n_k ×
/// head_dim`, or empty) of the same positions, building each position's angles once for both.
pub fn rope_qk(q: &mut [f32], n_q: usize, k: &mut [f32], n_k: usize, head_dim: usize, pos0: usize, p: &RopeParams) {
    let half = p.n_rot / 2;
    if half == 0 || head_dim == 0 || n_q == 0 {
        return;
    }
    let theta_scale = p.base.powf(-2.0 / p.n_rot as f32);
    // inline for heads up to 256 wide: a decode step ropes every layer
    let mut cs: smallvec::SmallVec<[(f32, f32); 128]> = smallvec::smallvec![(0f32, 0f32); half];
    let (qw, kw) = (n_q * head_dim, n_k * head_dim);
    for t in 0..q.len() / qw {
        let mut theta = (pos0 + t) as f32;
        for (i, c) in cs.iter_mut().enumerate() {
            let ff = p.freq_factors.as_ref().map_or(1.0, |f| f[i]);
            *c = match &p.yarn {
                Some(y) => y.cos_sin(theta / ff, p.freq_scale, i),
                None => {
                    let th = p.freq_scale * (theta / ff);
                    (th.cos(), th.sin())
                }
            };
            theta *= theta_scale;
        }
        let krow: &mut [f32] = if kw == 0 { &mut [] } else { &mut k[t * kw..(t + 1) * kw] };
        for head in q[t * qw..(t + 1) * qw].chunks_exact_mut(head_dim).chain(krow.chunks_exact_mut(head_dim)) {
            for (i, &(c, s)) in cs.iter().enumerate() {
                let (a, b) = match p.kind {
                    RopeKind::Norm => (2 * i, 2 * i + 1),
                    RopeKind::Neox => (i, i + half),
                };
                let (x0, x1) = (head[a], head[b]);
                head[a] = x0 * c - x1 * s;
                head[b] = x0 * s + x1 * c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_zero_is_identity_and_pairs_differ() {
        let p = RopeParams { kind: RopeKind::Norm, n_rot: 4, base: 10000.0, freq_scale: 1.0, freq_factors: None, yarn: None };
        let mut x = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        rope_qk(&mut x, 1, &mut [], 0, 6, 0, &p);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut a = vec![1.0f32, 0.0, 0.0, 0.0];
        rope_qk(&mut a, 1, &mut [], 0, 4, 1, &p);
        assert!((a[0] - 1f32.cos()).abs() < 1e-6 && (a[1] - 1f32.sin()).abs() < 1e-6);
        let mut b = vec![1.0f32, 0.0, 0.0, 0.0];
        rope_qk(&mut b, 1, &mut [], 0, 4, 1, &RopeParams { kind: RopeKind::Neox, ..p });
        assert!((b[0] - 1f32.cos()).abs() < 1e-6 && (b[2] - 1f32.sin()).abs() < 1e-6);
    }

    #[test]
    fn yarn_keeps_fast_pairs_and_interpolates_slow_ones() {
        // n_rot 32, base 1.5e5, original context 4096, factor 32 (gpt-oss-tiny): ramp over pairs 4..9
        let y = Yarn::new(32, 4096, 150000.0, 1.0 / 32.0, 1.0);
        assert_eq!(y.corr_dims, [4.0, 9.0]);
        let m = y.attn_factor * (1.0 + 0.1 * 32f32.ln());
        assert!((m - (1.0 + 0.1 * 32f32.ln())).abs() < 1e-6);
        let (c, s) = y.cos_sin(0.7, 1.0 / 32.0, 2);
        assert!((c - 0.7f32.cos() * m).abs() < 1e-6 && (s - 0.7f32.sin() * m).abs() < 1e-6);
        let (c, _) = y.cos_sin(0.7, 1.0 / 32.0, 12);
        assert!((c - (0.7f32 / 32.0).cos() * m).abs() < 1e-6);
    }
}
