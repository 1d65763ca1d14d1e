//! Q3_K: super-blocks of 256 = 16 sub-blocks of 16. Layout: `hmask[32]`, `qs[64]` (low 2 bits),
//! 12 bytes of packed 6-bit scales, `d: f16`. Element l + 32·t + 128·h (l < 32, t < 4) takes
//! bits 2t..2t+2 of `qs[32h + l]` and, as its high bit, bit 4h + t of `hmask[l]`; a clear high bit
//! subtracts 4. value = d·(sc − 32)·q. Dot type: Q8_K.

use super::q6_k::dot_16;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 110;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q3_K,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[108]),
};
pub const HMASK: usize = 0;
pub const QS: usize = 32;
pub const SCALES: usize = 96;
pub const D: usize = 108;

/// The 16 signed sub-block scales (already minus 32).
#[inline(always)]
pub fn scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for j in 0..16 {
        let low = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let high = (s[8 + (j % 4)] >> (2 * (j / 4))) & 3;
        out[j] = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// The 256 quants (−4..4) of a block in element order.
#[inline(always)]
pub fn unpack(b: &[u8]) -> [i8; 256] {
    let mut a = [0i8; 256];
    for h in 0..2 {
        for t in 0..4 {
            let bit = 4 * h + t;
            for l in 0..32 {
                let lo = ((b[QS + 32 * h + l] >> (2 * t)) & 3) as i8;
                let hi = (b[HMASK + l] >> bit) & 1;
                a[128 * h + 32 * t + l] = lo - if hi != 0 { 0 } else { 4 };
            }
        }
    }
    a
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, D);
        let sc = scales(&b[SCALES..SCALES + 12]);
        let a = unpack(b);
        for s in 0..16 {
            let dl = d * sc[s] as f32;
            for l in 0..16 {
                y[16 * s + l] = dl * a[16 * s + l] as f32;
            }
        }
    }
}

/// Scalar dot with a Q8_K activation row (as Q6_K's).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_16::<BLOCK_BYTES, D>(w, x, |b| (scales(&b[SCALES..SCALES + 12]), unpack(b)))
}
