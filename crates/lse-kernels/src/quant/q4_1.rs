//! Q4_1: blocks of 32, `d: f16`, `m: f16`, 16 bytes of nibbles (low nibbles = elements 0..16,
//! high = 16..32); value = d·q + m. Dot type: Q8_1.

use super::q8_1;
use crate::fp::rd_f16;

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 20;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q4_1,
    dot_type: super::DotType::Q8_1,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0, 2]),
};

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        let m = rd_f16(b, 2);
        for j in 0..16 {
            y[j] = (b[4 + j] & 0x0f) as f32 * d + m;
            y[j + 16] = (b[4 + j] >> 4) as f32 * d + m;
        }
    }
}

/// Scalar dot with a Q8_1 activation row: per block `(dx·dy)·sumi + mx·sy` (ggml generic order).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(BLOCK_BYTES)
        .zip(x.chunks_exact(q8_1::BLOCK_BYTES))
    {
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            s0 += (wb[4 + j] & 0x0f) as i32 * (xb[4 + j] as i8 as i32);
            s1 += (wb[4 + j] >> 4) as i32 * (xb[4 + 16 + j] as i8 as i32);
        }
        sumf += (rd_f16(wb, 0) * rd_f16(xb, 0)) * (s0 + s1) as f32 + rd_f16(wb, 2) * rd_f16(xb, 2);
    }
    sumf
}
