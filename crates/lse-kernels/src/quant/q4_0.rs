//! Q4_0: blocks of 32, `d: f16` then 16 bytes of nibbles; element j (< 16) is the low nibble of
//! byte j, element j + 16 the high nibble; value = d·(q − 8). Dot type: Q8_0.

use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 32;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q4_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for j in 0..16 {
            y[j] = ((b[2 + j] & 0x0f) as i32 - 8) as f32 * d;
            y[j + 16] = ((b[2 + j] >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// Scalar dot with a Q8_0 activation row (ggml generic order).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(BLOCK_BYTES)
        .zip(x.chunks_exact(q8_0::BLOCK_BYTES))
    {
        let (mut s0, mut s1) = (0i32, 0i32);
        for j in 0..16 {
            s0 += ((wb[2 + j] & 0x0f) as i32 - 8) * (xb[2 + j] as i8 as i32);
            s1 += ((wb[2 + j] >> 4) as i32 - 8) * (xb[2 + 16 + j] as i8 as i32);
        }
        sumf += (s0 + s1) as f32 * rd_f16(wb, 0) * rd_f16(xb, 0);
    }
    sumf
}
