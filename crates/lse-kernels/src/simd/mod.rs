//! Run-time chosen SIMD kernels. Each ISA lives in its own file; this module picks the best
//! level the CPU has (capped with the engine option `simd`, e.g. AVX2 on an AVX-512 machine) and
//! hands out row kernels.

use lse_gguf::GgmlType;
use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
#[cfg(target_arch = "aarch64")]
pub mod neon;

/// Activation rows one kernel call handles at most.
pub const MR: usize = 8;

/// `out[j] = dot(w, x[j·x_stride..])` for `j < nx` (1 ≤ nx ≤ MR): one weight row of `k`
/// elements against `nx` activation rows already in the weight's dot type, laid out as the
/// kernel's [`ActLayout`] says.
pub type RowKernel =
    fn(k: usize, w: &[u8], x: &[u8], x_stride: usize, nx: usize, out: &mut [f32; MR]);

/// How a kernel wants its activation rows laid out. The values are always llama.cpp's
/// (same quants and scales); only their placement differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActLayout {
    /// ggml's block layout of the dot type (what `quant::quantize_activation` writes).
    Ggml,
    /// For the 32-element dot types (Q8_0, Q8_1): all quants first (`k` bytes), then the block
    /// scales `d` as f32 (`k/32` of them), then per block Q8_0: Σq as i32, Q8_1: `s` as f32.
    /// Lets a kernel load 8 block scales with one instruction.
    Split32,
}

/// A SIMD row kernel and the activation layout it reads.
#[derive(Clone, Copy)]
pub struct SimdKernel {
    pub kern: RowKernel,
    pub layout: ActLayout,
}

/// Bytes of one activation row of `k` elements in dot type `dt` and `layout`.
pub fn act_row_bytes(layout: ActLayout, dt: crate::quant::DotType, k: usize) -> usize {
    match layout {
        ActLayout::Ggml => dt.row_bytes(k),
        ActLayout::Split32 => k + 8 * (k / 32),
    }
}

/// Rewrites one ggml-layout activation row (`dt` Q8_0 or Q8_1, `k` elements) into
/// [`ActLayout::Split32`].
pub fn ggml_to_split32(dt: crate::quant::DotType, src: &[u8], k: usize, dst: &mut [u8]) {
    use crate::fp::rd_f16;
    use crate::quant::DotType;
    let nb = k / 32;
    let (bb, qo) = match dt {
        DotType::Q8_0 => (34, 2),
        DotType::Q8_1 => (36, 4),
        _ => panic!("Split32 is only for Q8_0/Q8_1 activations"),
    };
    assert!(src.len() >= nb * bb && dst.len() >= k + 8 * nb);
    for b in 0..nb {
        let blk = &src[b * bb..(b + 1) * bb];
        dst[32 * b..32 * b + 32].copy_from_slice(&blk[qo..qo + 32]);
        dst[k + 4 * b..k + 4 * b + 4].copy_from_slice(&rd_f16(blk, 0).to_le_bytes());
        let extra = if dt == DotType::Q8_0 {
            blk[2..34]
                .iter()
                .map(|&q| q as i8 as i32)
                .sum::<i32>()
                .to_le_bytes()
        } else {
            rd_f16(blk, 2).to_le_bytes()
        };
        dst[k + 4 * nb + 4 * b..k + 4 * nb + 4 * b + 4].copy_from_slice(&extra);
    }
}

/// An instruction-set level with kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Scalar,
    Avx2,
    Avx512,
    Neon,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "x86_64-avx2",
            Level::Avx512 => "x86_64-avx512",
            Level::Neon => "aarch64-neon",
        }
    }

    /// The name [`parse_level`] reads.
    pub fn short_name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::Avx512 => "avx512",
            Level::Neon => "neon",
        }
    }
}

/// Every level this CPU can run, best last (always includes `Scalar`).
pub fn available_levels() -> Vec<Level> {
    let mut v = vec![Level::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        if avx2::available() {
            v.push(Level::Avx2);
        }
        if avx512::available() {
            v.push(Level::Avx512);
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        if neon::available() {
            v.push(Level::Neon);
        }
    }
    v
}

static LEVEL: OnceLock<Level> = OnceLock::new();

/// The level `Dialect::Simd` uses: the best available, unless [`cap_level`] fixed another first.
pub fn level() -> Level {
    *LEVEL.get_or_init(|| *available_levels().last().unwrap_or(&Level::Scalar))
}

/// A level by its short name (`avx512`, `avx2`, `neon`, `scalar`).
pub fn parse_level(s: &str) -> Option<Level> {
    Some(match s {
        "avx512" => Level::Avx512,
        "avx2" => Level::Avx2,
        "neon" => Level::Neon,
        "scalar" => Level::Scalar,
        _ => return None,
    })
}

/// Runs `Dialect::Simd` at `cap` (e.g. AVX2 kernels on an AVX-512 machine, to measure what an
/// AVX2-only CPU gets). The level is one per process, fixed at first use: a different level
/// already in use, or one this CPU lacks, is refused with a message naming both.
pub fn cap_level(cap: Level) -> Result<(), String> {
    let avail = available_levels();
    if !avail.contains(&cap) {
        let names: Vec<&str> = avail.iter().map(|l| l.name()).collect();
        return Err(format!("this CPU has no {} kernels (it has: {})", cap.name(), names.join(", ")));
    }
    let now = *LEVEL.get_or_init(|| cap);
    if now != cap {
        return Err(format!("this process already runs {} kernels; {} needs a new process", now.name(), cap.name()));
    }
    Ok(())
}

/// The row kernel for weight type `t` at `level`, or `None` (the caller falls back to scalar).
pub fn row_kernel(level: Level, t: GgmlType) -> Option<SimdKernel> {
    match level {
        Level::Scalar => None,
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => avx2::row_kernel(t),
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => avx512::row_kernel(t).or_else(|| avx2::row_kernel(t)),
        #[cfg(target_arch = "aarch64")]
        Level::Neon => neon::row_kernel(t),
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// Q8_K rows of `x` written straight in the packed tiles' Split32 layout (see
/// `matmul::quantize_rows_q8k_split`, whose bytes they are) where `level` has a vector writer;
/// `false` where the caller must convert llama.cpp's layout itself.
pub(crate) fn quantize_q8k_split32(level: Level, x: &[f32], dst: &mut [u8], sub16: bool) -> bool {
    #[cfg(target_arch = "x86_64")]
    if matches!(level, Level::Avx2 | Level::Avx512) && avx2::available() && x.len().is_multiple_of(256) {
        // SAFETY: the CPU has AVX2/FMA/F16C (checked); the writer checks `dst`'s length.
        unsafe { avx2::quantize_q8_k_split32(x, dst, sub16) };
        return true;
    }
    let _ = (level, x, dst, sub16);
    false
}

/// Converts one activation row to dot type `dt` in `layout`, with the vector quantizers of
/// `level` where there are some. The values are identical to
/// [`crate::quant::quantize_activation`]'s (byte-identical for [`ActLayout::Ggml`]).
pub fn quantize_activation(
    level: Level,
    layout: ActLayout,
    dt: crate::quant::DotType,
    x: &[f32],
    dst: &mut [u8],
) {
    use crate::quant::DotType;
    assert_eq!(
        x.len() % dt.block_size(),
        0,
        "activation length not a multiple of the block size"
    );
    assert!(
        dst.len() >= act_row_bytes(layout, dt, x.len()),
        "activation buffer too small"
    );
    #[cfg(target_arch = "x86_64")]
    {
        if matches!(level, Level::Avx2 | Level::Avx512) && avx2::available() {
            // SAFETY: the CPU has AVX2/FMA/F16C (checked above); lengths checked above.
            unsafe {
                match (layout, dt) {
                    (ActLayout::Ggml, DotType::Q8_0) => {
                        return avx2::quantize_q8_32::<false, false>(x, dst)
                    }
                    (ActLayout::Ggml, DotType::Q8_1) => {
                        return avx2::quantize_q8_32::<true, false>(x, dst)
                    }
                    (ActLayout::Split32, DotType::Q8_0) => {
                        return avx2::quantize_q8_32::<false, true>(x, dst)
                    }
                    (ActLayout::Split32, DotType::Q8_1) => {
                        return avx2::quantize_q8_32::<true, true>(x, dst)
                    }
                    (ActLayout::Ggml, DotType::Q8_K) => return avx2::quantize_q8_k(x, dst),
                    (ActLayout::Ggml, DotType::F16) => return avx2::quantize_f16(x, dst),
                    _ => {}
                }
            }
        }
    }
    let _ = level;
    match layout {
        ActLayout::Ggml => crate::quant::quantize_activation(dt, x, dst),
        ActLayout::Split32 => {
            assert!(
                matches!(dt, DotType::Q8_0 | DotType::Q8_1),
                "Split32 is only for Q8_0/Q8_1 activations"
            );
            let mut tmp = vec![0u8; dt.row_bytes(x.len())];
            crate::quant::quantize_activation(dt, x, &mut tmp);
            ggml_to_split32(dt, &tmp, x.len(), dst);
        }
    }
}

#[cfg(test)]
mod tests;
