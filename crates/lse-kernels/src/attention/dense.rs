//! Dense attention for one query row: the whole score row (scaled Q·K), softmax, then `P·V`.

use super::vec::VecIsa;
use super::{Keys, Scratch};

pub(crate) fn row(isa: VecIsa, q: &[f32], scale: f32, keys: &Keys, sc: &mut Scratch, out: &mut [f32]) {
    let n = keys.len();
    sc.scores.resize(n, 0.0);
    let s = &mut sc.scores[..n];
    let mut max = f32::NEG_INFINITY;
    for (j, sj) in s.iter_mut().enumerate() {
        *sj = isa.dot(q, &keys.k[j * keys.dk..(j + 1) * keys.dk]) * scale;
        max = max.max(*sj);
    }
    let mut sum = 0.0f64;
    for sj in s.iter_mut() {
        *sj = (*sj - max).exp();
        sum += *sj as f64;
    }
    let inv = if sum > 0.0 { (1.0 / sum) as f32 } else { 0.0 };
    out.fill(0.0);
    for (j, &p) in s.iter().enumerate() {
        isa.axpy(out, p * inv, &keys.v[j * keys.dv..(j + 1) * keys.dv]);
    }
}
