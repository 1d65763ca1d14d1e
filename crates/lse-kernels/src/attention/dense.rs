//! Dense attention for one query row: the whole score row (scaled Q·K), softmax, then `P·V`.

use super::vec::VecIsa;
use super::{Keys, Scratch};

pub(crate) fn row(isa: VecIsa, q: &[f32], scale: f32, keys: &Keys, sc: &mut Scratch, out: &mut [f32]) {
    let n = keys.len();
    sc.scores.resize(n, 0.0);
    let s = &mut sc.scores[..n];
    isa.scores(q, keys.k, keys.dk, scale, s);
    let max = s.iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
    let sum = isa.exp_sub(s, max);
    let inv = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
    for p in s.iter_mut() {
        *p *= inv;
    }
    out.fill(0.0);
    isa.weighted_sum(out, s, keys.v);
}
