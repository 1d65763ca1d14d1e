//! IQ2_S: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 32 low index bytes
//! (4 per sub-block), 32 sign bytes (one per 8 elements, bit j negates element j), 8 `qh`
//! bytes (bits 2l..2l+2 of byte ib: index bits 8..10 of code l of sub-block ib), 8 scale bytes
//! (low nibble: first 16 elements of the sub-block, high: last 16). Indices address
//! [`IQ2S_GRID`]. value = d·(0.5 + s)·0.25·grid·sign. Dot type: Q8_K.

use super::iq_common::{bsum_iq2, dequantize_iq2, dot_bsum};
use super::iq_grids::IQ2S_GRID;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 82;
pub const QS: usize = 2;
pub const SIGNS: usize = 34;
pub const QH: usize = 66;
pub const SCALES: usize = 74;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ2_S,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// Code `l` (0..4) of sub-block `ib`: (grid point, sign byte).
#[inline(always)]
pub fn code(b: &[u8], ib: usize, l: usize) -> (u64, u8) {
    let hi = ((b[QH + ib] as usize) >> (2 * l) & 3) << 8;
    (IQ2S_GRID[b[QS + 4 * ib + l] as usize | hi], b[SIGNS + 4 * ib + l])
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
