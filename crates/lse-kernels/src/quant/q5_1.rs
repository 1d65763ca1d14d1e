//! Q5_1: blocks of 32, `d: f16`, `m: f16`, `qh: u32`, 16 bytes of low nibbles;
//! value = d·q + m with q in 0..32. Dot type: Q8_1.

use super::q8_1;
use crate::fp::rd_f16;

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 24;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q5_1,
    dot_type: super::DotType::Q8_1,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0, 2]),
};

/// The 32 quants of a block, each in 0..32.
#[inline(always)]
pub fn unpack(b: &[u8]) -> [u8; 32] {
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let mut q = [0u8; 32];
    for j in 0..16 {
        q[j] = (b[8 + j] & 0x0f) | ((((qh >> j) & 1) as u8) << 4);
        q[j + 16] = (b[8 + j] >> 4) | ((((qh >> (j + 16)) & 1) as u8) << 4);
    }
    q
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        let m = rd_f16(b, 2);
        let q = unpack(b);
        for j in 0..QK {
            y[j] = q[j] as f32 * d + m;
        }
    }
}

/// Scalar dot with a Q8_1 activation row (ggml generic order).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(BLOCK_BYTES)
        .zip(x.chunks_exact(q8_1::BLOCK_BYTES))
    {
        let q = unpack(wb);
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            s0 += q[j] as i32 * (xb[4 + j] as i8 as i32);
            s1 += q[j + 16] as i32 * (xb[4 + 16 + j] as i8 as i32);
        }
        sumf += (rd_f16(wb, 0) * rd_f16(xb, 0)) * (s0 + s1) as f32 + rd_f16(wb, 2) * rd_f16(xb, 2);
    }
    sumf
}
