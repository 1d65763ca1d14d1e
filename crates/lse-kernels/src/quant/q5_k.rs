//! Q5_K: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, `dmin: f16`, 12 scale
//! bytes (as Q4_K), `qh[32]` (bit 2c / 2c+1 of byte l = 5th bit of element l of sub-block
//! 2c / 2c+1), 128 bytes of low nibbles (as Q4_K). value = d·sc·q − dmin·m. Dot type: Q8_K.

use super::q4_k::{dot_block_k, scales_mins};
use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 176;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q5_K,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0, 2]),
};
pub const SCALES: usize = 4;
pub const QH: usize = 16;
pub const QS: usize = 48;

/// The 256 quants (0..32) of a block in element order.
#[inline(always)]
fn unpack(b: &[u8]) -> [i8; 256] {
    let mut a = [0i8; 256];
    for c in 0..4 {
        for l in 0..32 {
            let q = b[QS + 32 * c + l];
            let h = b[QH + l];
            a[64 * c + l] = ((q & 0x0f) | (((h >> (2 * c)) & 1) << 4)) as i8;
            a[64 * c + 32 + l] = ((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4)) as i8;
        }
    }
    a
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        let dmin = rd_f16(b, 2);
        let (sc, mn) = scales_mins(&b[SCALES..SCALES + 12]);
        let a = unpack(b);
        for s in 0..8 {
            let (ds, ms) = (d * sc[s] as f32, dmin * mn[s] as f32);
            for l in 0..32 {
                y[32 * s + l] = ds * a[32 * s + l] as f32 - ms;
            }
        }
    }
}

/// Scalar dot with a Q8_K activation row (ggml generic order, as Q4_K).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sums = [0.0f32; 8];
    let mut sumf = 0.0f32;
    for (wb, xb) in w
        .chunks_exact(BLOCK_BYTES)
        .zip(x.chunks_exact(q8_k::BLOCK_BYTES))
    {
        let (sc, mn) = scales_mins(&wb[SCALES..SCALES + 12]);
        let (aux32, summ) = dot_block_k(&unpack(wb), &sc, &mn, xb);
        let d = rd_f16(wb, 0) * q8_k::d(xb);
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
        let dmin = rd_f16(wb, 2) * q8_k::d(xb);
        sumf -= dmin * summ as f32;
    }
    for s in sums {
        sumf += s;
    }
    sumf
}
