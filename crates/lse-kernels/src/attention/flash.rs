//! Flash attention for one query row: keys in tiles, running max `m` and sum `l`, the output
//! accumulator rescaled by `exp(m_old - m_new)` whenever the maximum grows. The sum is kept in
//! f64 and the accumulator in f32, as llama.cpp's tiled CPU kernel does.

use super::vec::VecIsa;
use super::{Keys, Scratch};

/// Keys per tile.
const TILE: usize = 64;

pub(crate) fn row(isa: VecIsa, q: &[f32], scale: f32, keys: &Keys, sc: &mut Scratch, out: &mut [f32]) {
    let n = keys.len();
    out.fill(0.0);
    let mut m = f32::NEG_INFINITY;
    let mut l = 0.0f64;
    sc.scores.resize(TILE, 0.0);
    let mut j0 = 0;
    while j0 < n {
        let j1 = (j0 + TILE).min(n);
        let s = &mut sc.scores[..j1 - j0];
        isa.scores(q, &keys.k[j0 * keys.dk..j1 * keys.dk], keys.dk, scale, s);
        let tile_max = s.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
        if tile_max > m {
            if l > 0.0 {
                let alpha = (m - tile_max).exp();
                isa.scale(out, alpha);
                l *= alpha as f64;
            }
            m = tile_max;
        }
        l += isa.exp_sub(s, m);
        isa.weighted_sum(out, s, &keys.v[j0 * keys.dv..j1 * keys.dv]);
        j0 = j1;
    }
    let inv = if l > 0.0 { (1.0 / l) as f32 } else { 0.0 };
    isa.scale(out, inv);
}
