//! IQ3_S: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 64 low index bytes
//! (8 per sub-block, 4 elements per point of [`IQ3S_GRID`]), 8 `qh` bytes (bit i of byte ib:
//! index bit 8 of code i of sub-block ib), 32 sign bytes (one per 8 elements, bit j negates
//! element j), 4 scale bytes (sub-block ib in nibble ib%2 of byte ib/2).
//! value = d·(1 + 2s)·grid·sign. Dot type: Q8_K.

use super::iq_common::{dot_bsum, gbyte32, sign, sign_f};
use super::iq_grids::IQ3S_GRID;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 110;
pub const QS: usize = 2;
pub const QH: usize = 66;
pub const SIGNS: usize = 74;
pub const SCALES: usize = 106;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ3_S,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// The odd scale 1 + 2s of sub-block `ib`.
#[inline(always)]
pub fn scale(b: &[u8], ib: usize) -> i32 {
    1 + 2 * ((b[SCALES + ib / 2] >> (4 * (ib % 2))) & 15) as i32
}

/// Grid point `i` (0..8) of sub-block `ib`.
#[inline(always)]
pub fn point(b: &[u8], ib: usize, i: usize) -> u32 {
    let hi = ((b[QH + ib] as usize) >> i & 1) << 8;
    IQ3S_GRID[b[QS + 8 * ib + i] as usize | hi]
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let db = d * scale(b, ib) as f32;
            for e in 0..32 {
                let g = gbyte32(point(b, ib, e / 4), e % 4);
                let signs = b[SIGNS + 4 * ib + e / 8];
                y[32 * ib + e] = db * g as f32 * sign_f(signs, e % 8);
            }
        }
    }
}

/// Σ grid·sign·q over sub-block `ib`.
#[inline(always)]
pub fn sub_dot(b: &[u8], ib: usize, xq: &[u8]) -> i32 {
    let mut sumi = 0i32;
    for e in 0..32 {
        let g = gbyte32(point(b, ib, e / 4), e % 4) as i32;
        let signs = b[SIGNS + 4 * ib + e / 8];
        sumi += g * (xq[32 * ib + e] as i8 as i32) * sign(signs, e % 8);
    }
    sumi
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block with the odd
/// scales, `sumf += (dx·dy)·bsum`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_bsum(w, x, BLOCK_BYTES, 1.0, |b, xq| {
        (0..8).map(|ib| sub_dot(b, ib, xq) * scale(b, ib)).sum()
    })
}
