//! Q6_K: super-blocks of 256 = 16 sub-blocks of 16. Layout: `ql[128]` (low 4 bits),
//! `qh[64]` (high 2 bits), 16 × `i8` scales, `d: f16`. Within each half of 128 elements
//! (ql += 64, qh += 32 per half), element l + 32·t (l < 32, t < 4) takes the low or high
//! nibble of `ql[l + 32·(t&1)]` (high for t ≥ 2) and bits 2t..2t+2 of `qh[l]`; value = d·sc·(q − 32).
//! Dot type: Q8_K.

use super::q8_k;
use crate::fp::rd_f16;

pub const QK: usize = 256;
pub const BLOCK_BYTES: usize = 210;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::Q6_K,
    dot_type: super::DotType::Q8_K,
    dequantize,
    dot,
    scales: super::ScaleFields::F16(&[208]),
};
pub const QL: usize = 0;
pub const QH: usize = 128;
pub const SCALES: usize = 192;
pub const D: usize = 208;

/// The 256 quants (−32..32) of a block in element order.
#[inline(always)]
pub fn unpack(b: &[u8]) -> [i8; 256] {
    let mut a = [0i8; 256];
    for h in 0..2 {
        let ql = &b[QL + 64 * h..QL + 64 * h + 64];
        let qh = &b[QH + 32 * h..QH + 32 * h + 32];
        let o = 128 * h;
        for l in 0..32 {
            a[o + l] = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            a[o + l + 32] = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            a[o + l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            a[o + l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    a
}

/// The 16 signed sub-block scales.
#[inline(always)]
fn scales(b: &[u8]) -> [i8; 16] {
    std::array::from_fn(|s| b[SCALES + s] as i8)
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        let d = rd_f16(b, D);
        let a = unpack(b);
        for s in 0..16 {
            let ds = d * (b[SCALES + s] as i8) as f32;
            for l in 0..16 {
                y[16 * s + l] = ds * a[16 * s + l] as f32;
            }
        }
    }
}

/// Scalar dot with a Q8_K activation row (see [`dot_16`]).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    dot_16::<BLOCK_BYTES, D>(w, x, |b| (scales(b), unpack(b)))
}

/// Scalar dot of a row of Q6_K/Q3_K-shaped blocks (`BB` bytes: 16 sub-blocks of 16 with signed
/// scales, f16 `d` at byte `DO`; `split` gives a block's scales and quants in element order) with
/// a Q8_K activation row, in ggml's generic order: 8 integer lanes, 8 f32 sums.
#[inline(always)]
pub(crate) fn dot_16<const BB: usize, const DO: usize>(
    w: &[u8],
    x: &[u8],
    split: impl Fn(&[u8]) -> ([i8; 16], [i8; 256]),
) -> f32 {
    let mut sums = [0.0f32; 8];
    for (wb, xb) in w.chunks_exact(BB).zip(x.chunks_exact(q8_k::BLOCK_BYTES)) {
        let (sc, a) = split(wb);
        let mut aux32 = [0i32; 8];
        for (p, &av) in a.iter().enumerate() {
            aux32[p % 8] += sc[p / 16] as i32 * (q8_k::q(xb, p) * av as i32);
        }
        let d = rd_f16(wb, DO) * q8_k::d(xb);
        for l in 0..8 {
            sums[l] += d * aux32[l] as f32;
        }
    }
    let mut sumf = 0.0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}
