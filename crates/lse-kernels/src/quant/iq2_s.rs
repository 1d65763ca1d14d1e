//! IQ2_S: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, 32 low index bytes
//! (4 per sub-block), 32 sign bytes (one per 8 elements, bit j negates element j), 8 `qh`
//! bytes (bits 2l..2l+2 of byte ib: index bits 8..10 of code l of sub-block ib), 8 scale bytes
//! (low nibble: first 16 elements of the sub-block, high: last 16). Indices address
//! [`IQ2S_GRID`]. value = d·(0.5 + s)·0.25·grid·sign. Dot type: Q8_K.

use super::iq_common::{gbyte64, sign, sign_f};
use super::iq_grids::IQ2S_GRID;
use super::q8_k;
use crate::fp::rd_f16;

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
            sumi += q * gbyte64(grid, j) as i32 * sign(signs, j);
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
            let ls1 = 1 + 2 * scale(wb, ib, 0) as i32;
            let ls2 = 1 + 2 * scale(wb, ib, 1) as i32;
            bsum += ls1 * half_dot(wb, ib, 0, xq) + ls2 * half_dot(wb, ib, 1, xq);
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}
