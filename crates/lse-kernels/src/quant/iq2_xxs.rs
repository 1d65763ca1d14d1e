//! IQ2_XXS: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, then per sub-block two
//! u32 words: the first holds 4 grid indices (one byte each, 8 elements per grid point of
//! [`IQ2XXS_GRID`]), the second four 7-bit sign indices (bits 7l..7l+7, see
//! [`ksigns`]) and a 4-bit scale s in bits 28..32.
//! value = d·(0.5 + s)·0.25·grid·sign. Dot type: Q8_K.

use super::iq_common::{dot_bsum, gbyte64, ksigns, sign, sign_f};
use super::iq_grids::IQ2XXS_GRID;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 66;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ2_XXS,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// The two words of sub-block `ib`.
#[inline(always)]
pub fn words(b: &[u8], ib: usize) -> (u32, u32) {
    let o = 2 + 8 * ib;
    let w = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
    (w(o), w(o + 4))
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let (g, s) = words(b, ib);
            let db = d * (0.5 + (s >> 28) as f32) * 0.25;
            for l in 0..4 {
                let grid = IQ2XXS_GRID[(g >> (8 * l) & 255) as usize];
                let signs = ksigns(s >> (7 * l));
                for j in 0..8 {
                    y[32 * ib + 8 * l + j] = db * gbyte64(grid, j) as f32 * sign_f(signs, j);
                }
            }
        }
    }
}

/// Σ grid·sign·q over sub-block `ib` (the block's 256 activation quants at `xq`).
#[inline(always)]
pub fn sub_dot(b: &[u8], ib: usize, xq: &[u8]) -> i32 {
    let (g, s) = words(b, ib);
    let mut sumi = 0i32;
    for l in 0..4 {
        let grid = IQ2XXS_GRID[(g >> (8 * l) & 255) as usize];
        let signs = ksigns(s >> (7 * l));
        for j in 0..8 {
            let q = xq[32 * ib + 8 * l + j] as i8 as i32;
            sumi += gbyte64(grid, j) as i32 * q * sign(signs, j);
        }
    }
    sumi
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block with the odd
/// scales 2s + 1, `sumf += (dx·dy)·bsum`, times 1/8 at the end).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_bsum(w, x, BLOCK_BYTES, 0.125, |b, xq| {
        (0..8)
            .map(|ib| sub_dot(b, ib, xq) * (2 * (words(b, ib).1 >> 28) as i32 + 1))
            .sum()
    })
}
