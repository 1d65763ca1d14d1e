//! Q2_0: blocks of 64, `d: f16` then 16 bytes of 2-bit codes (bits 2(j%4).. of byte j/4 for
//! element j). value = (q − 1)·d, q in 0..4. Dot type: Q8_0 (two activation blocks per Q2_0
//! block).

use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 64;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q2_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

#[inline(always)]
fn value(b: &[u8], j: usize) -> i32 {
    ((b[2 + j / 4] >> (2 * (j % 4))) & 3) as i32 - 1
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for (j, v) in y.iter_mut().enumerate() {
            *v = value(b, j) as f32 * d;
        }
    }
}

/// Scalar dot with a Q8_0 row (ggml generic order: `sumi += dy·Σ(q−1)·q8` per activation
/// block in f32, then `sumf += d·sumi`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(2 * q8_0::BLOCK_BYTES)) {
        let mut sumi = 0.0f32;
        for k in 0..2 {
            let yb = &xb[q8_0::BLOCK_BYTES * k..];
            let mut s = 0i32;
            for j in 0..32 {
                s += value(wb, 32 * k + j) * (yb[2 + j] as i8 as i32);
            }
            sumi += rd_f16(yb, 0) * s as f32;
        }
        sumf += rd_f16(wb, 0) * sumi;
    }
    sumf
}
