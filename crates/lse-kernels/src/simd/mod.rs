//! Run-time chosen SIMD kernels. Each ISA lives in its own file; this module picks the best
//! level the CPU has (overridable with `LSE_SIMD=scalar|avx2|avx512|neon` for comparisons) and
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
pub const MR: usize = 4;

/// `out[j] = dot(w, x[j·x_stride..])` for `j < nx` (1 ≤ nx ≤ MR): one weight row of `k`
/// elements against `nx` activation rows already in the weight's dot type.
pub type RowKernel = fn(k: usize, w: &[u8], x: &[u8], x_stride: usize, nx: usize, out: &mut [f32; MR]);

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

/// The level `Dialect::Simd` uses: the best available, capped by `LSE_SIMD` when set.
pub fn level() -> Level {
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        let avail = available_levels();
        let best = *avail.last().unwrap_or(&Level::Scalar);
        match std::env::var("LSE_SIMD").ok().as_deref() {
            Some("scalar") => Level::Scalar,
            Some("avx2") if avail.contains(&Level::Avx2) => Level::Avx2,
            Some("avx512") if avail.contains(&Level::Avx512) => Level::Avx512,
            Some("neon") if avail.contains(&Level::Neon) => Level::Neon,
            _ => best,
        }
    })
}

/// The row kernel for weight type `t` at `level`, or `None` (the caller falls back to scalar).
pub fn row_kernel(level: Level, t: GgmlType) -> Option<RowKernel> {
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

#[cfg(test)]
mod tests;
