//! Q1_0: blocks of 128, `d: f16` then 16 bytes of sign bits (bit j%8 of byte j/8 for element
//! j). value = +d where the bit is set, −d where not. Dot type: Q8_0 (four activation blocks
//! per Q1_0 block).

use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 128;
pub const BLOCK_BYTES: usize = 18;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q1_0,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0]),
};

#[inline(always)]
fn bit(b: &[u8], j: usize) -> bool {
    b[2 + j / 8] >> (j % 8) & 1 != 0
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        for (j, v) in y.iter_mut().enumerate() {
            *v = if bit(b, j) { d } else { -d };
        }
    }
}

/// Scalar dot with a Q8_0 row (ggml generic order: `sumi += dy·Σ±q` per activation block in
/// f32, then `sumf += d·sumi`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(4 * q8_0::BLOCK_BYTES)) {
        let mut sumi = 0.0f32;
        for k in 0..4 {
            let yb = &xb[q8_0::BLOCK_BYTES * k..];
            let mut s = 0i32;
            for j in 0..32 {
                let q = yb[2 + j] as i8 as i32;
                s += if bit(wb, 32 * k + j) { q } else { -q };
            }
            sumi += rd_f16(yb, 0) * s as f32;
        }
        sumf += rd_f16(wb, 0) * sumi;
    }
    sumf
}
