//! Quantized block formats, dot products and matrix kernels (scalar reference + runtime-chosen SIMD).
//!
//! * [`dequantize_row`] decodes any supported weight row to f32.
//! * [`matmul`] computes `y[m][n] = Σ_k x[m][k]·W[n][k]` with activations converted once per call
//!   to the weight's dot type exactly as llama.cpp's CPU backend does (Q8_0 for Q4_0/Q5_0/Q8_0,
//!   IQ4_NL, MXFP4, NVFP4, Q1_0, Q2_0; Q8_1 for Q4_1/Q5_1; Q8_K for the k-quants, the other
//!   i-quants and TQ1_0/TQ2_0; f16 for F16, bf16 for BF16, f32 for F32).
//! * [`Dialect::Scalar`] runs the reference kernels (ggml's generic integer math and float order);
//!   [`Dialect::Simd`] the best SIMD level of this CPU (AVX-512 VNNI, AVX2, NEON), tested
//!   against the scalar kernels.
//! * [`ThreadPool`] is the long-lived pool every parallel kernel runs on ([`run_profile`] times
//!   its runs by call site for the benches).
//!
//! Supported weight types: those with a descriptor in [`quant::FORMATS`] (F32, F16, BF16, the
//! legacy quants, the k-quants, the i-quants, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0, Q2_0;
//! [`supports`]). Callers check `supports` when binding weights; the kernels themselves assert
//! their length contracts.

pub mod act;
pub mod attention;
mod fp;
mod matmul;
mod matmul_packed;
mod next_run;
#[cfg(test)]
mod test_rng;
pub mod packed;
pub mod pages;
mod pool;
pub mod quant;
pub mod reduce;
pub mod run_profile;
pub mod simd;
#[cfg(target_arch = "x86_64")]
mod vexp;

pub use fp::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
pub use lse_gguf::GgmlType;
pub use matmul::matmul;
pub use matmul_packed::{matmul_packed, matmul_packed_cols, matmul_packed_many};
pub use packed::{packable, PackedMatrix};
pub use pool::ThreadPool;

/// Which implementation family the kernels use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Dialect {
    /// Portable reference kernels (the test oracle).
    Scalar,
    /// The best SIMD kernels this CPU runs, chosen at run time.
    #[default]
    Simd,
}

/// The kernel family `d` runs on this machine: "x86_64-avx512", "x86_64-avx2", "aarch64-neon"
/// or "scalar".
pub fn device_arch(d: Dialect) -> &'static str {
    match d {
        Dialect::Scalar => "scalar",
        Dialect::Simd => simd::level().name(),
    }
}

/// True when weights of type `t` can be dequantized and multiplied here.
pub fn supports(t: GgmlType) -> bool {
    quant::dot_type(t).is_some()
}

/// Decodes `dst.len()` elements of type `t` from `src` (whole blocks, `src` at least
/// `t.row_bytes(dst.len())` bytes). Panics on an unsupported type or a length that is not a
/// multiple of the block size (check [`supports`] first).
pub fn dequantize_row(t: GgmlType, src: &[u8], dst: &mut [f32]) {
    let f = quant::dequantize_fn(t)
        .unwrap_or_else(|| panic!("dequantize_row: unsupported type {}", t.name()));
    let need = t.row_bytes(dst.len()).unwrap_or_else(|| {
        panic!(
            "dequantize_row: {} elements is not a multiple of the {} block",
            dst.len(),
            t.name()
        )
    });
    assert!(
        src.len() >= need,
        "dequantize_row: {} bytes given, {} needed",
        src.len(),
        need
    );
    f(&src[..need], dst);
}

