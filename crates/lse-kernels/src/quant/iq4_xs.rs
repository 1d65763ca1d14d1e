//! IQ4_XS: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, `scales_h: u16`
//! (2 high bits of sub-block ib's scale at bit 2·ib), `scales_l[4]` (low 4 bits, sub-block ib
//! in nibble ib%2 of byte ib/2), 128 bytes of nibbles (16 per sub-block: element j < 16 the
//! low nibble of byte j, j + 16 the high one) indexing [`KVALUES_IQ4NL`].
//! value = d·(ls − 32)·kvalue with the 6-bit ls. Dot type: Q8_K.

use super::iq_common::KVALUES_IQ4NL;
use super::q8_k;
use crate::fp::{rd_f16, rd_u16};

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 136;
pub const QS: usize = 8;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ4_XS,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

/// The 6-bit scale of sub-block `ib` (0..8), minus 32.
#[inline(always)]
pub fn scale(b: &[u8], ib: usize) -> i32 {
    let lo = (b[4 + ib / 2] >> (4 * (ib % 2))) & 15;
    let hi = (rd_u16(b, 2) >> (2 * ib)) & 3;
    (lo as i32 | (hi as i32) << 4) - 32
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for ib in 0..8 {
            let dl = d * scale(b, ib) as f32;
            let q = &b[QS + 16 * ib..QS + 16 * ib + 16];
            for j in 0..16 {
                y[32 * ib + j] = dl * KVALUES_IQ4NL[(q[j] & 15) as usize] as f32;
                y[32 * ib + 16 + j] = dl * KVALUES_IQ4NL[(q[j] >> 4) as usize] as f32;
            }
        }
    }
}

/// The integer dot of sub-block `ib` with the activation quants at `xq` (the block's 256).
#[inline(always)]
pub fn sub_dot(b: &[u8], ib: usize, xq: &[u8]) -> i32 {
    let q = &b[QS + 16 * ib..QS + 16 * ib + 16];
    let mut s = 0i32;
    for j in 0..16 {
        s += (xq[32 * ib + j] as i8 as i32) * KVALUES_IQ4NL[(q[j] & 15) as usize] as i32;
    }
    let mut s2 = 0i32;
    for j in 0..16 {
        s2 += (xq[32 * ib + 16 + j] as i8 as i32) * KVALUES_IQ4NL[(q[j] >> 4) as usize] as i32;
    }
    s + s2
}

/// Scalar dot with a Q8_K row (ggml generic order: per sub-block
/// `sumf += (dx·dy·(ls − 32))·Σ`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let d4d8 = rd_f16(wb, 0) * q8_k::d(xb);
        let xq = &xb[q8_k::QS..q8_k::QS + 256];
        for ib in 0..8 {
            sumf += (d4d8 * scale(wb, ib) as f32) * sub_dot(wb, ib, xq) as f32;
        }
    }
    sumf
}
