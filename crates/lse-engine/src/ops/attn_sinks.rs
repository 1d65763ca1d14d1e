//! Attention sinks (gpt-oss): a learned logit per head that joins every softmax denominator and
//! carries no value. With `Z` = the sum of exp(score) over a query's visible keys, the sunk output
//! is the plain attention output times `Z / (Z + exp(sink))` = `1 / (1 + exp(sink - ln Z))`, so
//! it applies after either attention kernel. ln Z is recomputed here from Q and the cached K.

use crate::kv_cache::LayerKv;
use lse_kernels::attention::kv;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `f(0..n)` on the compute threads (`Backend::run`).
pub type Run<'a> = &'a dyn Fn(usize, &(dyn Fn(usize) + Sync));

/// One attention call's geometry (as the kernel saw it).
pub struct SinkCall<'a> {
    pub n_head: usize,
    pub scale: f32,
    pub window: Option<usize>,
    pub sinks: &'a [f32],
}

/// Scales `out` (`n` rows of `n_head × head_dim_v`) for queries `q` (`n` rows of
/// `n_head × head_dim_k`, after rope) at positions `pos0..`; `run` spreads (row, kv head) pairs
/// over the threads.
pub fn apply(c: &SinkCall, q: &[f32], n: usize, pos0: usize, cache: &LayerKv, out: &mut [f32], run: Run) {
    let (hk, dk, dv) = (cache.n_head_kv, cache.head_dim_k, cache.head_dim_v);
    let view = cache.view();
    let Some(kb) = kv::kv_row_bytes(view.ty, dk) else { return };
    let group = c.n_head / hk.max(1);
    let factor: Vec<AtomicU32> = (0..n * c.n_head).map(|_| AtomicU32::new(0)).collect();
    // one task per (query row, kv head): each cached K row is read once for the heads sharing it
    run(n * hk, &|task| {
        let (i, g) = (task / hk, task % hk);
        let t = pos0 + i;
        let first = c.window.map_or(0, |w| (t + 1).saturating_sub(w));
        let n_keys = t + 1 - first;
        let mut krow = vec![0f32; dk];
        let mut scores = vec![0f32; group * n_keys];
        for (j, p) in (first..=t).enumerate() {
            kv::load_row(view.ty, &view.k[(p * hk + g) * kb..][..kb], &mut krow);
            for r in 0..group {
                let qh = &q[(i * c.n_head + g * group + r) * dk..][..dk];
                scores[r * n_keys + j] = qh.iter().zip(&krow).map(|(a, b)| a * b).sum::<f32>() * c.scale;
            }
        }
        for (r, sc) in scores.chunks_exact(n_keys).enumerate() {
            let h = g * group + r;
            let max = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let lse = max as f64 + sc.iter().map(|&s| ((s - max) as f64).exp()).sum::<f64>().ln();
            let f = 1.0 / (1.0 + (c.sinks[h] as f64 - lse).exp());
            factor[i * c.n_head + h].store((f as f32).to_bits(), Ordering::Relaxed);
        }
    });
    for (o, f) in out.chunks_exact_mut(dv).zip(&factor) {
        let f = f32::from_bits(f.load(Ordering::Relaxed));
        o.iter_mut().for_each(|v| *v *= f);
    }
}
