//! Block formats: one file per format with its layout, dequantization, activation quantization
//! (for the activation formats Q8_0/Q8_1/Q8_K) and the scalar reference dot. Each weight format
//! file ends its header with a [`Format`] descriptor; [`FORMATS`] lists them, and everything
//! else (`dot_type`, `scalar_dot_fn`, `dequantize_fn`, `lse_kernels::supports`) reads that list.
//! The SIMD kernels are listed once for both x86 levels in `simd::avx2::kernel_list!`.
//!
//! The scalar dots follow ggml's generic C code (same integer sums, same float order) and are
//! the oracle every SIMD kernel is tested against.

#![allow(clippy::needless_range_loop)] // block math reads clearer with explicit indices

pub mod float;
pub mod iq1_m;
pub mod iq1_s;
pub mod iq2_s;
pub mod iq2_xs;
pub mod iq2_xxs;
pub mod iq3_s;
pub mod iq3_xxs;
pub mod iq4_nl;
pub mod iq4_xs;
pub mod iq_common;
pub mod iq_grids;
pub mod lowbit;
pub mod mxfp4;
pub mod nvfp4;
pub mod q1_0;
pub mod q2_0;
pub mod q2_k;
pub mod q3_k;
pub mod q4_0;
pub mod q4_1;
pub mod q4_k;
pub mod q5_0;
pub mod q5_1;
pub mod q5_k;
pub mod q6_k;
pub mod q8_0;
pub mod q8_1;
pub mod q8_k;
pub mod tq1_0;
pub mod tq2_0;

use lse_gguf::GgmlType;

/// The format activations are converted to before a dot with a weight row (ggml's
/// `vec_dot_type`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DotType {
    F32,
    F16,
    BF16,
    Q8_0,
    Q8_1,
    Q8_K,
}

impl DotType {
    /// Elements per block.
    pub fn block_size(self) -> usize {
        match self {
            DotType::F32 | DotType::F16 | DotType::BF16 => 1,
            DotType::Q8_0 | DotType::Q8_1 => 32,
            DotType::Q8_K => 256,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            DotType::F32 => 4,
            DotType::F16 | DotType::BF16 => 2,
            DotType::Q8_0 => q8_0::BLOCK_BYTES,
            DotType::Q8_1 => q8_1::BLOCK_BYTES,
            DotType::Q8_K => q8_k::BLOCK_BYTES,
        }
    }

    /// Bytes of a row of `k` elements (`k` a multiple of the block size).
    pub fn row_bytes(self, k: usize) -> usize {
        k / self.block_size() * self.block_bytes()
    }
}

/// Everything the kernels know about one weight format: its activation format, decoder and
/// scalar reference dot. Each format file defines its descriptor; [`FORMATS`] lists them.
pub struct Format {
    pub ty: GgmlType,
    /// The activation format of the dot (ggml's `vec_dot_type`).
    pub dot_type: DotType,
    /// Dequantization of whole blocks.
    pub dequantize: DequantFn,
    /// The scalar reference dot (the oracle of the SIMD kernels).
    pub dot: DotFn,
    /// Where a block keeps its scales (for making synthetic blocks with finite scales).
    pub scales: ScaleFields,
}

/// Where a block keeps the scale fields that random bytes could make non-finite or huge.
pub enum ScaleFields {
    /// Plain f16 fields at these byte offsets (empty for float rows).
    F16(&'static [usize]),
    /// One E8M0 exponent byte at this offset.
    E8M0(usize),
    /// `n` UE4M3 bytes from this offset.
    Ue4m3(usize, usize),
    /// One f16 split into the top nibbles of four u16 words from this offset (nibble i in
    /// word i).
    F16Nibbles(usize),
}

impl ScaleFields {
    /// Overwrites the scale fields of `block` with finite, moderate values drawn with `unit`
    /// (uniform in [0, 1)); f16 scales are `0.002 + 0.03·unit()`.
    pub fn set_sane(&self, block: &mut [u8], unit: &mut dyn FnMut() -> f32) {
        let h = |u: f32| crate::fp::f32_to_f16(0.002 + 0.03 * u);
        match *self {
            ScaleFields::F16(offs) => {
                for &o in offs {
                    block[o..o + 2].copy_from_slice(&h(unit()).to_le_bytes());
                }
            }
            // 2^(e-128): between 2^-10 and 2^-4
            ScaleFields::E8M0(o) => block[o] = 118 + (unit() * 7.0) as u8,
            // exponent field 1..=6, any mantissa: 2^-6 .. 2^-1 before the format's halving
            ScaleFields::Ue4m3(o, n) => {
                for v in &mut block[o..o + n] {
                    *v = 0x08 + (unit() * 48.0) as u8;
                }
            }
            ScaleFields::F16Nibbles(o) => {
                let d = h(unit());
                for i in 0..4 {
                    let p = o + 2 * i;
                    let w = u16::from_le_bytes([block[p], block[p + 1]]) & 0x0fff;
                    let w = w | (((d >> (4 * i)) & 0xf) << 12);
                    block[p..p + 2].copy_from_slice(&w.to_le_bytes());
                }
            }
        }
    }
}

/// Every weight format with kernels here.
pub const FORMATS: &[&Format] = &[
    &float::F32,
    &float::F16,
    &float::BF16,
    &q4_0::FORMAT,
    &q4_1::FORMAT,
    &q5_0::FORMAT,
    &q5_1::FORMAT,
    &q8_0::FORMAT,
    &q2_k::FORMAT,
    &q3_k::FORMAT,
    &q4_k::FORMAT,
    &q5_k::FORMAT,
    &q6_k::FORMAT,
    &iq2_xxs::FORMAT,
    &iq2_xs::FORMAT,
    &iq3_xxs::FORMAT,
    &iq1_s::FORMAT,
    &iq4_nl::FORMAT,
    &iq3_s::FORMAT,
    &iq2_s::FORMAT,
    &iq4_xs::FORMAT,
    &iq1_m::FORMAT,
    &tq1_0::FORMAT,
    &tq2_0::FORMAT,
    &mxfp4::FORMAT,
    &nvfp4::FORMAT,
    &q1_0::FORMAT,
    &q2_0::FORMAT,
];

/// The descriptor of weight type `t`, or `None` when `t` has no kernels here.
pub fn format(t: GgmlType) -> Option<&'static Format> {
    FORMATS.iter().copied().find(|f| f.ty == t)
}

/// The activation format for weights of type `t`, or `None` when `t` has no kernel here.
pub fn dot_type(t: GgmlType) -> Option<DotType> {
    format(t).map(|f| f.dot_type)
}

/// Quantizes one activation row `x` (length a multiple of the block size) into `dst`
/// (`dt.row_bytes(x.len())` bytes).
pub fn quantize_activation(dt: DotType, x: &[f32], dst: &mut [u8]) {
    assert_eq!(
        x.len() % dt.block_size(),
        0,
        "activation length not a multiple of the block size"
    );
    assert!(
        dst.len() >= dt.row_bytes(x.len()),
        "activation buffer too small"
    );
    match dt {
        DotType::F32 => float::quantize_f32(x, dst),
        DotType::F16 => float::quantize_f16(x, dst),
        DotType::BF16 => float::quantize_bf16(x, dst),
        DotType::Q8_0 => q8_0::quantize(x, dst),
        DotType::Q8_1 => q8_1::quantize(x, dst),
        DotType::Q8_K => q8_k::quantize(x, dst),
    }
}

/// A scalar dot: one weight row, one activation row in the dot type.
pub type DotFn = fn(&[u8], &[u8]) -> f32;
/// Dequantization of whole blocks into `dst.len()` floats.
pub type DequantFn = fn(&[u8], &mut [f32]);

/// The scalar reference dot of one weight row of type `t` with one activation row already in
/// `dot_type(t)`; both slices hold exactly one row. `None` when `t` has no kernel.
pub fn scalar_dot_fn(t: GgmlType) -> Option<DotFn> {
    format(t).map(|f| f.dot)
}

/// Dequantization of whole blocks for `t`, or `None` when unsupported.
pub fn dequantize_fn(t: GgmlType) -> Option<DequantFn> {
    format(t).map(|f| f.dequantize)
}
