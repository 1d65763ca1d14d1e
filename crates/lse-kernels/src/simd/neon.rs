//! NEON kernels for aarch64 (none yet: every type falls back to the scalar kernels).
use super::SimdKernel;
use lse_gguf::GgmlType;

pub fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

pub fn row_kernel(_t: GgmlType) -> Option<SimdKernel> {
    None
}
