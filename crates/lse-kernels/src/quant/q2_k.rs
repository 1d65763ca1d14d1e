//! Q2_K: super-blocks of 256 = 16 sub-blocks of 16. Layout: 16 scale bytes (low nibble = scale,
//! high nibble = min), `qs[64]` (2-bit quants), `d: f16`, `dmin: f16`. Within each half of 128
//! elements (qs += 32 per half), element l + 32·t (l < 32, t < 4) is bits 2t..2t+2 of `qs[l]`;
//! value = d·sc·q − dmin·m. Dot type: Q8_K.

use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 84;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q2_K,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[80, 82]),
};
pub const SCALES: usize = 0;
pub const QS: usize = 16;
pub const D: usize = 80;
pub const DMIN: usize = 82;

/// The 256 quants (0..4) of a block in element order.
#[inline(always)]
pub fn unpack(b: &[u8]) -> [i8; 256] {
    let mut a = [0i8; 256];
    for h in 0..2 {
        for t in 0..4 {
            for l in 0..32 {
                a[128 * h + 32 * t + l] = ((b[QS + 32 * h + l] >> (2 * t)) & 3) as i8;
            }
        }
    }
    a
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, D);
        let dmin = rd_f16(b, DMIN);
        let a = unpack(b);
        for s in 0..16 {
            let sc = b[SCALES + s];
            let (dl, ml) = (d * (sc & 0x0f) as f32, dmin * (sc >> 4) as f32);
            for l in 0..16 {
                y[16 * s + l] = dl * a[16 * s + l] as f32 - ml;
            }
        }
    }
}

/// Scalar dot with a Q8_K activation row (ggml generic order: per block
/// `dall·isum − dmin·summs`, summed in f32).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
    {
        let mut summs = 0i32;
        for g in 0..16 {
            summs += q8_k::bsum(xb, g) * (wb[SCALES + g] >> 4) as i32;
        }
        let a = unpack(wb);
        let mut isum = 0i32;
        for s in 0..16 {
            let mut isuml = 0i32;
            for l in 0..16 {
                isuml += q8_k::q(xb, 16 * s + l) * a[16 * s + l] as i32;
            }
            isum += (wb[SCALES + s] & 0x0f) as i32 * isuml;
        }
        let dall = q8_k::d(xb) * rd_f16(wb, D);
        let dmin = q8_k::d(xb) * rd_f16(wb, DMIN);
        sumf += dall * isum as f32 - dmin * summs as f32;
    }
    sumf
}
