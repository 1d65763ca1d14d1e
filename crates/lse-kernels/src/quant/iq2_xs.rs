//! IQ2_XS: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 32 u16 codes (4 per
//! sub-block: bits 0..9 index [`IQ2XS_GRID`], bits 9..16 a sign index, see [`ksigns`]), then
//! 8 scale bytes (sub-block ib: low nibble for its first 16 elements, high for the last 16).
//! value = d·(0.5 + s)·0.25·grid·sign. Dot type: Q8_K.

use super::iq_common::{bsum_iq2, dequantize_iq2, dot_bsum, ksigns};
use super::iq_grids::IQ2XS_GRID;
use crate::fp::rd_u16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 74;
pub const SCALES: usize = 66;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ2_XS,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// Code `l` (0..4) of sub-block `ib`: (grid point, sign byte).
#[inline(always)]
pub fn code(b: &[u8], ib: usize, l: usize) -> (u64, u8) {
    let c = rd_u16(b, 2 + 8 * ib + 2 * l);
    (IQ2XS_GRID[(c & 511) as usize], ksigns((c >> 9) as u32))
}

/// The 4-bit scale of half `h` (0, 1) of sub-block `ib`.
#[inline(always)]
pub fn scale(b: &[u8], ib: usize, h: usize) -> u32 {
    ((b[SCALES + ib] >> (4 * h)) & 15) as u32
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    dequantize_iq2(src, dst, BLOCK_BYTES, code, scale)
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block with the odd
/// scales 2s + 1, `sumf += (dx·dy)·bsum`, times 1/8 at the end).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_bsum(w, x, BLOCK_BYTES, 0.125, |b, xq| bsum_iq2(b, xq, code, scale))
}
