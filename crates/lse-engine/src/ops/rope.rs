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
}

/// Rotates `x` (`n_tokens` rows of `n_heads × head_dim`); row `t` is at position `pos0 + t`.
pub fn rope(x: &mut [f32], n_heads: usize, head_dim: usize, pos0: usize, p: &RopeParams) {
    let half = p.n_rot / 2;
    if half == 0 || head_dim == 0 {
        return;
    }
    let theta_scale = p.base.powf(-2.0 / p.n_rot as f32);
    let mut cs = vec![(0f32, 0f32); half];
    for (t, row) in x.chunks_exact_mut(n_heads * head_dim).enumerate() {
        let mut theta = (pos0 + t) as f32;
        for (i, c) in cs.iter_mut().enumerate() {
            let ff = p.freq_factors.as_ref().map_or(1.0, |f| f[i]);
            let th = p.freq_scale * (theta / ff);
            *c = (th.cos(), th.sin());
            theta *= theta_scale;
        }
        for head in row.chunks_exact_mut(head_dim) {
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
        let p = RopeParams { kind: RopeKind::Norm, n_rot: 4, base: 10000.0, freq_scale: 1.0, freq_factors: None };
        let mut x = vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        rope(&mut x, 1, 6, 0, &p);
        assert_eq!(x, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let mut a = vec![1.0f32, 0.0, 0.0, 0.0];
        rope(&mut a, 1, 4, 1, &p);
        assert!((a[0] - 1f32.cos()).abs() < 1e-6 && (a[1] - 1f32.sin()).abs() < 1e-6);
        let mut b = vec![1.0f32, 0.0, 0.0, 0.0];
        rope(&mut b, 1, 4, 1, &RopeParams { kind: RopeKind::Neox, ..p });
        assert!((b[0] - 1f32.cos()).abs() < 1e-6 && (b[2] - 1f32.sin()).abs() < 1e-6);
    }
}
