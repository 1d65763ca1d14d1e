//! TQ2_0 (ternary, 2 bits): super-blocks of 256. Layout: 64 bytes `qs`, `d: f16`. Bits 2l..2l+2
//! of byte 32c + m hold element 128c + 32l + m as 0, 1, 2 (3 unused by the quantizer).
//! value = d·(q − 1). Dot type: Q8_K.

use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 66;
pub const D: usize = 64;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::TQ2_0,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[D]),
};

/// q − 1 of element `e`.
#[inline(always)]
pub fn value(b: &[u8], e: usize) -> i32 {
    let (c, l, m) = (e / 128, (e % 128) / 32, e % 32);
    ((b[32 * c + m] >> (2 * l)) & 3) as i32 - 1
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, D);
        for (e, v) in y.iter_mut().enumerate() {
            *v = value(b, e) as f32 * d;
        }
    }
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block,
/// `sumf += sumi·(dy·dx)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let sumi: i32 = (0..256).map(|e| value(wb, e) * q8_k::q(xb, e)).sum();
        sumf += sumi as f32 * (q8_k::d(xb) * rd_f16(wb, D));
    }
    sumf
}
