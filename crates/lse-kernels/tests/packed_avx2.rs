//! The packed matmul with the kernels capped to AVX2 (its own process: the level is fixed once
//! per process) against the scalar reference, including the extreme blocks that reach the AVX2
//! tile's i16 bounds.

mod common;
mod packed_check;

use lse_kernels::simd::{available_levels, cap_level, Level};

#[test]
fn packed_avx2_matches_scalar() {
    if !available_levels().contains(&Level::Avx2) {
        println!("no AVX2 here: skipped");
        return;
    }
    cap_level(Level::Avx2).unwrap();
    packed_check::packed_matmul_matches_scalar();
}
