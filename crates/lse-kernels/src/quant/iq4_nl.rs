//! IQ4_NL: blocks of 32, `d: f16` then 16 bytes of nibbles; element j < 16 is the low nibble of
//! byte j, element j + 16 its high nibble, each an index into the non-linear codebook
//! [`KVALUES_IQ4NL`]. value = d·kvalue. Dot type: Q8_0.

use super::iq_common::KVALUES_IQ4NL;
use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::IQ4_NL,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..16 {
            y[j] = d * KVALUES_IQ4NL[(b[2 + j] & 15) as usize] as f32;
            y[j + 16] = d * KVALUES_IQ4NL[(b[2 + j] >> 4) as usize] as f32;
        }
    }
}

/// Scalar dot with a Q8_0 row (ggml generic order: per block `(dy·dx)·(Σlow + Σhigh)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_0::BLOCK_BYTES)) {
        let d = rd_f16(xb, 0) * rd_f16(wb, 0);
        let (mut s1, mut s2) = (0i32, 0i32);
        for j in 0..16 {
            s1 += (xb[2 + j] as i8 as i32) * KVALUES_IQ4NL[(wb[2 + j] & 15) as usize] as i32;
            s2 += (xb[18 + j] as i8 as i32) * KVALUES_IQ4NL[(wb[2 + j] >> 4) as usize] as i32;
        }
        sumf += d * (s1 + s2) as f32;
    }
    sumf
}
