//! The loops Q1_0 and Q2_0 share: blocks of `qk` elements (a multiple of 32) with an f16 scale
//! `d` at byte 0 and small integer values, dotted with qk/32 Q8_0 activation blocks.

use super::q8_0;
use crate::fp::rd_f16;

/// value(block, j)·d for every element.
#[inline(always)]
pub fn dequantize(
    src: &[u8],
    dst: &mut [f32],
    block_bytes: usize,
    qk: usize,
    value: impl Fn(&[u8], usize) -> i32,
) {
    for (b, y) in src.chunks_exact(block_bytes).zip(dst.chunks_exact_mut(qk)) {
        let d = rd_f16(b, 0);
        for (j, v) in y.iter_mut().enumerate() {
            *v = value(b, j) as f32 * d;
        }
    }
}

/// ggml generic order: per activation block `sumi += dy·Σ value·q` in f32, then per weight
/// block `sumf += d·sumi`.
#[inline(always)]
pub fn dot(
    w: &[u8],
    x: &[u8],
    block_bytes: usize,
    qk: usize,
    value: impl Fn(&[u8], usize) -> i32,
) -> f32 {
    let groups = qk / 32;
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(block_bytes)
        .zip(x.chunks_exact(groups * q8_0::BLOCK_BYTES))
    {
        let mut sumi = 0.0f32;
        for g in 0..groups {
            let yb = &xb[q8_0::BLOCK_BYTES * g..];
            let mut s = 0i32;
            for j in 0..32 {
                s += value(wb, 32 * g + j) * (yb[2 + j] as i8 as i32);
            }
            sumi += rd_f16(yb, 0) * s as f32;
        }
        sumf += rd_f16(wb, 0) * sumi;
    }
    sumf
}
