//! IQ2_XS: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 32 u16 codes (4 per
//! sub-block: bits 0..9 index [`IQ2XS_GRID`], bits 9..16 a sign index, see [`ksigns`]), then
//! 8 scale bytes (sub-block ib: low nibble for its first 16 elements, high for the last 16).
//! value = d·(0.5 + s)·0.25·grid·sign. Dot type: Q8_K.

use super::iq_common::{gbyte64, ksigns, sign, sign_f};
use super::iq_grids::IQ2XS_GRID;
use super::q8_k;
use crate::fp::{rd_f16, rd_u16};

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
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            for l in 0..4 {
                let db = d * (0.5 + scale(b, ib, l / 2) as f32) * 0.25;
                let (grid, signs) = code(b, ib, l);
                for j in 0..8 {
                    y[32 * ib + 8 * l + j] = db * gbyte64(grid, j) as f32 * sign_f(signs, j);
                }
            }
        }
    }
}

/// Σ grid·sign·q over half `h` (16 elements) of sub-block `ib`.
#[inline(always)]
pub fn half_dot(b: &[u8], ib: usize, h: usize, xq: &[u8]) -> i32 {
    let mut sumi = 0i32;
    for l in 2 * h..2 * h + 2 {
        let (grid, signs) = code(b, ib, l);
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
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let d = rd_f16(wb, 0) * q8_k::d(xb);
        let xq = &xb[q8_k::QS..q8_k::QS + 256];
        let mut bsum = 0i32;
        for ib in 0..8 {
            for h in 0..2 {
                bsum += half_dot(wb, ib, h, xq) * (2 * scale(wb, ib, h) as i32 + 1);
            }
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}
