//! TQ1_0 (ternary): super-blocks of 256. Layout: 48 bytes `qs`, 4 bytes `qh`, `d: f16`. Each
//! byte packs 5 (qs) or 4 (qh) base-3 digits as a fixed-point fraction: digit l of byte v is
//! `((v·3^l mod 256)·3) >> 8`. Element order: bytes 0..32 give elements 32l + m (l < 5),
//! bytes 32..48 give 160 + 16l + m, qh byte j gives 240 + 4l + j (l < 4).
//! value = d·(digit − 1). Dot type: Q8_K.

use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 54;
pub const QH: usize = 48;
pub const D: usize = 52;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::TQ1_0,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[D]),
};

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Base-3 digit `l` of a packed byte (0, 1 or 2).
#[inline(always)]
pub fn digit(v: u8, l: usize) -> i32 {
    ((v.wrapping_mul(POW3[l]) as u16 * 3) >> 8) as i32
}

/// The 256 ternary values (−1, 0, 1) of a block in element order.
pub fn unpack(b: &[u8]) -> [i8; 256] {
    let mut t = [0i8; 256];
    for l in 0..5 {
        for m in 0..32 {
            t[32 * l + m] = (digit(b[m], l) - 1) as i8;
        }
        for m in 0..16 {
            t[160 + 16 * l + m] = (digit(b[32 + m], l) - 1) as i8;
        }
    }
    for l in 0..4 {
        for j in 0..4 {
            t[240 + 4 * l + j] = (digit(b[QH + j], l) - 1) as i8;
        }
    }
    t
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, D);
        for (v, t) in y.iter_mut().zip(unpack(b)) {
            *v = t as f32 * d;
        }
    }
}

/// Scalar dot with a Q8_K row (ggml generic order: exact integer sum per block,
/// `sumf += sum·(dx·dy)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let t = unpack(wb);
        let sum: i32 = (0..256).map(|e| t[e] as i32 * q8_k::q(xb, e)).sum();
        sumf += sum as f32 * (rd_f16(wb, D) * q8_k::d(xb));
    }
    sumf
}
