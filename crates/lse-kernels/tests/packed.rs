//! The packed (register-tiled) matmul at this CPU's best level against the scalar reference:
//! same integer block sums, only the f32 order of the per-block terms differs.
//! `packed_avx2.rs` runs the same check with the kernels capped to AVX2.

mod common;
mod packed_check;

use packed_check::PACKED;

use common::*;
use lse_kernels::quant::{dot_type, quantize_activation};
use lse_kernels::{matmul, matmul_packed, packable, Dialect, GgmlType, PackedMatrix, ThreadPool};


#[test]
fn packed_matches_scalar() {
    packed_check::packed_matmul_matches_scalar();
}

/// `cargo test -p lse-kernels --release --test packed -- --ignored --nocapture`: GFLOP/s of the
/// packed and row-kernel matmuls on prefill shapes, 1 thread, best of 5.
/// On real weights (every packable type of the test models): the packed result's error against
/// exact f64 math on the quantized operands is about the row kernels' (mean, within 2x).
#[test]
fn packed_real_weights_as_accurate_as_row_kernels() {
    if !packable(GgmlType::Q4_1) {
        return;
    }
    let pool = ThreadPool::new(2);
    for (name, f) in test_models() {
        let mut seen = std::collections::BTreeSet::new();
        let mut rng = Rng::new(9);
        for ti in f.tensors() {
            let t = ti.ggml_type;
            if ti.dims.len() != 2 || !PACKED.contains(&t) || !seen.insert(t.name()) {
                continue;
            }
            let k = ti.dims[0] as usize;
            let n = (ti.dims[1] as usize).min(256);
            let rb = t.row_bytes(k).unwrap();
            let w = &f.tensor_data(ti)[..n * rb];
            let m = 9;
            let x = random_acts(&mut rng, m, k);
            let p = PackedMatrix::new(&pool, t, w, n, k).unwrap();
            let mut yp = vec![0f32; m * n];
            let mut yr = vec![0f32; m * n];
            matmul_packed(&pool, &p, &x, m, &mut yp);
            matmul(Dialect::Simd, &pool, t, w, n, k, &x, m, &mut yr);
            let dt = dot_type(t).unwrap();
            let (mut ep, mut er) = (0f64, 0f64);
            for i in 0..m {
                let mut qx = vec![0u8; dt.row_bytes(k)];
                quantize_activation(dt, &x[i * k..(i + 1) * k], &mut qx);
                for r in 0..n {
                    let (exact, _) = reference_dot(t, &w[r * rb..(r + 1) * rb], &qx, k);
                    ep += (yp[i * n + r] as f64 - exact).abs();
                    er += (yr[i * n + r] as f64 - exact).abs();
                }
            }
            let c = (m * n) as f64;
            println!("{name} {} {}: mean |err| packed {:.3e}, row kernels {:.3e}", ti.name, t.name(), ep / c, er / c);
            assert!(ep <= 2.0 * er + 1e-9 * c, "{name} {}: packed less accurate", ti.name);
        }
    }
}
