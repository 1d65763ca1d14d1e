//! NEON kernels for aarch64 (none yet: every type falls back to the scalar kernels).
use super::SimdKernel;
use lse_gguf::GgmlType;

/// False until NEON kernels exist, so `device_arch` reports "scalar" rather than a level that would
/// run the scalar kernels under NEON's name.
pub fn available() -> bool {
    false
}

pub fn row_kernel(_t: GgmlType) -> Option<SimdKernel> {
    None
}
