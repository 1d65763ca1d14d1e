//! Q4_K: super-blocks of 256 = 8 sub-blocks of 32. Layout: `d: f16`, `dmin: f16`,
//! 12 bytes of packed 6-bit (scale, min) pairs, 128 bytes of nibbles. Each 32-byte chunk c of
//! the nibbles holds sub-block 2c in its low nibbles and 2c+1 in its high nibbles.
//! value = d·sc·q − dmin·m. Dot type: Q8_K.

use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 144;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q4_K,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[0, 2]),
};
pub const SCALES: usize = 4;
pub const QS: usize = 16;

/// Unpacks the 12 scale bytes into 8 six-bit scales and 8 six-bit mins.
#[inline(always)]
pub fn scales_mins(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut mn = [0u8; 8];
    for j in 0..4 {
        sc[j] = s[j] & 63;
        mn[j] = s[j + 4] & 63;
    }
    for j in 4..8 {
        sc[j] = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
        mn[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
    (sc, mn)
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, 0);
        let dmin = rd_f16(b, 2);
        let (sc, mn) = scales_mins(&b[SCALES..SCALES + 12]);
        for c in 0..4 {
            let q = &b[QS + 32 * c..QS + 32 * c + 32];
            let (d1, m1) = (d * sc[2 * c] as f32, dmin * mn[2 * c] as f32);
            let (d2, m2) = (d * sc[2 * c + 1] as f32, dmin * mn[2 * c + 1] as f32);
            for l in 0..32 {
                y[64 * c + l] = d1 * (q[l] & 0x0f) as f32 - m1;
                y[64 * c + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
            }
        }
    }
}

/// The 256 quants (0..16) of a block in element order.
#[inline(always)]
fn unpack(b: &[u8]) -> [i8; 256] {
    let mut a = [0i8; 256];
    for c in 0..4 {
        for l in 0..32 {
            let q = b[QS + 32 * c + l];
            a[64 * c + l] = (q & 0x0f) as i8;
            a[64 * c + 32 + l] = (q >> 4) as i8;
        }
    }
    a
}

/// Shared tail of the Q4_K/Q5_K scalar dots: 8 integer lanes per block as ggml's generic code.
#[inline(always)]
pub(crate) fn dot_block_k(a: &[i8; 256], sc: &[u8; 8], mn: &[u8; 8], xb: &[u8]) -> ([i32; 8], i32) {
    let mut aux32 = [0i32; 8];
    for (p, &av) in a.iter().enumerate() {
        aux32[p % 8] += sc[p / 32] as i32 * (q8_k::q(xb, p) * av as i32);
    }
    let mut summ = 0i32;
    for g in 0..16 {
        summ += q8_k::bsum(xb, g) * mn[g / 2] as i32;
    }
    (aux32, summ)
}

/// Scalar dot with a Q8_K activation row (ggml generic order: 8 f32 lanes of `d·aux32`,
/// minus `dmin·Σ bsums·min` per block).
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
