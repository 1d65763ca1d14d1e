//! Attention with logit soft-capping (gemma2): each score `s = q·k` becomes
//! `cap * tanh(s * scale / cap)` before the softmax (ggml's flash kernel folds the scale in the
//! same way; its dense path computes `tanh(s / cap) * cap` with the scale 1 gemma2 uses). One task
//! per (query row, kv head); softmax summed in f64, then `P·V`. Not fused into the lse-kernels
//! attention kernels yet.

use super::attn_sinks::Run;
use crate::kv_cache::LayerKv;
use lse_kernels::attention::kv;
use std::sync::atomic::{AtomicU32, Ordering};

/// One soft-capped attention call.
pub struct SoftcapCall {
    pub n_head: usize,
    pub scale: f32,
    pub window: Option<usize>,
    pub cap: f32,
}

/// `out` (`n` rows of `n_head × head_dim_v`) = attention of `q` (`n` rows of `n_head × head_dim_k`,
/// after rope) at positions `pos0..` over the cached keys `0..pos0 + n`.
pub fn attention(c: &SoftcapCall, q: &[f32], n: usize, pos0: usize, cache: &LayerKv, out: &mut [f32], run: Run) {
    let (hk, dk, dv) = (cache.n_head_kv, cache.head_dim_k, cache.head_dim_v);
    let view = cache.view();
    let (Some(kb), Some(vb)) = (kv::kv_row_bytes(view.ty, dk), kv::kv_row_bytes(view.ty, dv)) else { return };
    let group = c.n_head / hk.max(1);
    let res: Vec<AtomicU32> = (0..out.len()).map(|_| AtomicU32::new(0)).collect();
    let scale = c.scale / c.cap;
    run(n * hk, &|task| {
        let (i, g) = (task / hk, task % hk);
        let t = pos0 + i;
        let first = c.window.map_or(0, |w| (t + 1).saturating_sub(w));
        let n_keys = t + 1 - first;
        let mut row = vec![0f32; dk.max(dv)];
        let mut scores = vec![0f32; group * n_keys];
        for (j, p) in (first..=t).enumerate() {
            kv::load_row(view.ty, &view.k[(p * hk + g) * kb..][..kb], &mut row[..dk]);
            for r in 0..group {
                let qh = &q[(i * c.n_head + g * group + r) * dk..][..dk];
                let s = qh.iter().zip(&row[..dk]).map(|(a, b)| a * b).sum::<f32>();
                scores[r * n_keys + j] = c.cap * (s * scale).tanh();
            }
        }
        let mut acc = vec![0f32; group * dv];
        let mut sums = vec![0f64; group];
        for (r, sc) in scores.chunks_exact_mut(n_keys).enumerate() {
            let max = sc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            for s in sc.iter_mut() {
                *s = (*s - max).exp();
                sums[r] += *s as f64;
            }
        }
        for (j, p) in (first..=t).enumerate() {
            kv::load_row(view.ty, &view.v[(p * hk + g) * vb..][..vb], &mut row[..dv]);
            for r in 0..group {
                let w = scores[r * n_keys + j];
                for (a, v) in acc[r * dv..(r + 1) * dv].iter_mut().zip(&row[..dv]) {
                    *a += w * v;
                }
            }
        }
        for r in 0..group {
            let inv = if sums[r] > 0.0 { (1.0 / sums[r]) as f32 } else { 0.0 };
            let o = (i * c.n_head + g * group + r) * dv;
            for (d, a) in acc[r * dv..(r + 1) * dv].iter().enumerate() {
                res[o + d].store((a * inv).to_bits(), Ordering::Relaxed);
            }
        }
    });
    for (o, r) in out.iter_mut().zip(&res) {
        *o = f32::from_bits(r.load(Ordering::Relaxed));
    }
}
