//! IQ1_S: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 32 low index bytes
//! (4 per sub-block), then one u16 `qh` per sub-block: bits 3l..3l+3 are index bits 8..11 of
//! code l, bits 12..15 the scale s, bit 15 the sign of the offset δ = ±1/8. Codes address
//! [`IQ1S_GRID`] (values −1, 0, 1). value = d·(2s + 1)·(grid + δ). Dot type: Q8_K.

use super::iq_common::IQ1_DELTA;
use super::iq_grids::IQ1S_GRID;
use super::q8_k;
use crate::fp::{rd_f16, rd_u16};

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 50;
pub const QS: usize = 2;
pub const QH: usize = 34;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ1_S,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// Grid point of code `l` (0..4) of sub-block `ib`.
#[inline(always)]
pub fn point(b: &[u8], ib: usize, l: usize) -> u64 {
    let qh = rd_u16(b, QH + 2 * ib) as usize;
    IQ1S_GRID[b[QS + 4 * ib + l] as usize | ((qh >> (3 * l) & 7) << 8)]
}

/// Grid value of element `e` (0..32) of sub-block `ib`.
#[inline(always)]
fn value(b: &[u8], ib: usize, e: usize) -> i32 {
    (point(b, ib, e / 8) >> (8 * (e % 8))) as u8 as i8 as i32
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let qh = rd_u16(b, QH + 2 * ib);
            let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
            let delta = if qh & 0x8000 != 0 { -IQ1_DELTA } else { IQ1_DELTA };
            for e in 0..32 {
                y[32 * ib + e] = dl * (value(b, ib, e) as f32 + delta);
            }
        }
    }
}

/// Scalar dot with a Q8_K row (ggml generic order: integer sums Σ ls·Σgrid·q and
/// Σ ls·(±1)·bsums per block, `sumf += dx·dy·(sumi + δ·sumi1)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for ib in 0..8 {
            let qh = rd_u16(wb, QH + 2 * ib);
            let ls = 2 * ((qh >> 12) & 7) as i32 + 1;
            let delta = if qh & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i32;
            for e in 0..32 {
                lsum += q8_k::q(xb, 32 * ib + e) * value(wb, ib, e);
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (q8_k::bsum(xb, 2 * ib) + q8_k::bsum(xb, 2 * ib + 1));
        }
        sumf += rd_f16(wb, 0) * q8_k::d(xb) * (sumi as f32 + IQ1_DELTA * sumi1 as f32);
    }
    sumf
}
