//! IQ3_XXS: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 64 grid index bytes
//! (8 per sub-block, 4 elements per point of [`IQ3XXS_GRID`]), then one u32 per sub-block:
//! four 7-bit sign indices (bits 7l..7l+7, each for 8 elements, see [`ksigns`]) and a 4-bit
//! scale s in bits 28..32. value = d·(0.5 + s)·0.5·grid·sign. Dot type: Q8_K.

use super::iq_common::{dot_bsum, gbyte32, ksigns, sign, sign_f};
use super::iq_grids::IQ3XXS_GRID;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 98;
pub const QS: usize = 2;
pub const SAS: usize = 66;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ3_XXS,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// The scale-and-signs word of sub-block `ib`.
#[inline(always)]
pub fn sas(b: &[u8], ib: usize) -> u32 {
    let o = SAS + 4 * ib;
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Element `e` (0..32) of sub-block `ib` before scaling: grid magnitude and sign.
#[inline(always)]
fn elem(b: &[u8], ib: usize, e: usize) -> (i32, u8) {
    let g = IQ3XXS_GRID[b[QS + 8 * ib + e / 4] as usize];
    (gbyte32(g, e % 4) as i32, ksigns(sas(b, ib) >> (7 * (e / 8))))
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let db = d * (0.5 + (sas(b, ib) >> 28) as f32) * 0.5;
            for e in 0..32 {
                let (g, signs) = elem(b, ib, e);
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
        let (g, signs) = elem(b, ib, e);
        sumi += g * (xq[32 * ib + e] as i8 as i32) * sign(signs, e % 8);
    }
    sumi
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block with the odd
/// scales 2s + 1, `sumf += (dx·dy)·bsum`, times 1/4 at the end).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_bsum(w, x, BLOCK_BYTES, 0.25, |b, xq| {
        (0..8)
            .map(|ib| sub_dot(b, ib, xq) * (2 * (sas(b, ib) >> 28) as i32 + 1))
            .sum()
    })
}
