//! NVFP4: blocks of 64 = 4 sub-blocks of 16. Layout: 4 UE4M3 scale bytes (one per sub-block),
//! then 8 bytes of nibbles per sub-block (element j < 8 the low nibble of byte j, j + 8 the
//! high one), each an E2M1 value doubled ([`KVALUES_MXFP4`]). value = ue4m3(d_s)/2·kvalue.
//! Dot type: Q8_0 (two activation blocks per NVFP4 block).

use super::iq_common::KVALUES_MXFP4;
use super::q8_0;
use crate::fp::rd_f16;

pub const QK: usize = 64;
pub const BLOCK_BYTES: usize = 36;

pub const FORMAT: super::Format = super::Format {
    ty: lse_gguf::GgmlType::NVFP4,
    dot_type: super::DotType::Q8_0,
    dequantize,
    dot,
    scales: super::ScaleFields::Ue4m3(0, 4),
};

/// Half the value of an unsigned E4M3 byte (4 exponent bits, bias 7, 3 mantissa bits; bit 7
/// ignored; the bytes 0 and 0x7F decode to 0, 0xFF does not), as ggml's `ggml_ue4m3_to_fp32`.
/// Every value is exact in f32.
#[inline(always)]
pub fn ue4m3_half(x: u8) -> f32 {
    UE4M3_HALF[x as usize]
}

static UE4M3_HALF: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut x = 1;
    while x < 256 {
        let e = ((x >> 3) & 15) as i32;
        let m = (x & 7) as f32;
        // (1 + m/8)·2^(e−7) or m·2^−9 (subnormal), then halved: all powers of two are exact
        let raw = if e == 0 {
            m * pow2(-9)
        } else {
            (1.0 + m / 8.0) * pow2(e - 7)
        };
        t[x] = if x == 0x7f { 0.0 } else { raw * 0.5 };
        x += 1;
    }
    t
};

/// 2^e for a normal-range exponent.
const fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// The code of element `j` (0..16) of sub-block `s`.
#[inline(always)]
fn code(b: &[u8], s: usize, j: usize) -> i32 {
    let v = b[4 + 8 * s + j % 8];
    KVALUES_MXFP4[(if j < 8 { v & 15 } else { v >> 4 }) as usize] as i32
}

pub fn dequantize(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(BLOCK_BYTES).zip(dst.chunks_exact_mut(QK)) {
        for s in 0..4 {
            let d = ue4m3_half(b[s]);
            for j in 0..16 {
                y[16 * s + j] = code(b, s, j) as f32 * d;
            }
        }
    }
}

/// Scalar dot with a Q8_0 row (ggml generic order: per sub-block
/// `sumf += dy·d·(Σlow + Σhigh)`).
pub fn dot(w: &[u8], x: &[u8]) -> f32 {
    let mut sumf = 0.0f32;
    for (wb, xb) in w.chunks_exact(BLOCK_BYTES).zip(x.chunks_exact(2 * q8_0::BLOCK_BYTES)) {
        for s in 0..4 {
            let d = ue4m3_half(wb[s]);
            let yb = &xb[q8_0::BLOCK_BYTES * (s / 2)..];
            let off = 2 + 16 * (s % 2);
            let (mut lo, mut hi) = (0i32, 0i32);
            for j in 0..8 {
                lo += (yb[off + j] as i8 as i32) * code(wb, s, j);
                hi += (yb[off + 8 + j] as i8 as i32) * code(wb, s, 8 + j);
            }
            sumf += rd_f16(yb, 0) * d * (lo + hi) as f32;
        }
    }
    sumf
}
