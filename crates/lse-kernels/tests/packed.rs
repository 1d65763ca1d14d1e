//! The packed (register-tiled AVX-512 VNNI) matmul against the scalar reference: same integer
//! block sums, only the f32 order of the per-block terms differs.

mod common;

use common::*;
use lse_kernels::quant::{dot_type, quantize_activation};
use lse_kernels::{matmul, matmul_packed, packable, Dialect, GgmlType, PackedMatrix, ThreadPool};

const PACKED: &[GgmlType] = &[
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
];

#[test]
fn packed_matmul_matches_scalar() {
    if !PACKED.iter().all(|&t| packable(t)) {
        println!("packed kernels not available on this CPU: skipped");
        return;
    }
    let pools = [ThreadPool::new(1), ThreadPool::new(2), ThreadPool::new(3)];
    let mut rng = Rng::new(77);
    for &t in PACKED {
        for (n, m, k) in [(37usize, 11usize, 320usize), (16, 1, 32), (301, 67, 512), (13, 203, 96), (64, 9, 576)] {
            let k = if t.block_size() == 256 { k.div_ceil(256) * 256 } else { k };
            let w = random_weights(&mut rng, t, n, k);
            let x = random_acts(&mut rng, m, k);
            let want = reference_matmul(t, &w, n, k, &x, m);
            let p = PackedMatrix::new(&pools[1], t, &w, n, k).unwrap();
            let mut first: Option<Vec<f32>> = None;
            for pool in &pools {
                let mut y = vec![f32::NAN; m * n];
                matmul_packed(pool, &p, &x, m, &mut y);
                match &first {
                    None => first = Some(y),
                    Some(f) => assert_eq!(&y, f, "{} packed: threads differ", t.name()),
                }
            }
            let y = first.unwrap();
            let mut simd = vec![f32::NAN; m * n];
            matmul(Dialect::Simd, &pools[0], t, &w, n, k, &x, m, &mut simd);
            let mut worst = 0f32;
            for i in 0..m {
                for r in 0..n {
                    let b = 2e-5 * 1.1 * row_mag(t, &w, r, k, &x[i * k..(i + 1) * k]) + 1e-6;
                    let e = (y[i * n + r] - want[i * n + r]).abs();
                    assert!(
                        e <= b,
                        "{} {n}x{m}x{k} y[{i}][{r}] = {} vs scalar {} (simd {})",
                        t.name(),
                        y[i * n + r],
                        want[i * n + r],
                        simd[i * n + r]
                    );
                    worst = worst.max(e / b);
                }
            }
            println!("{:5} packed {n}x{m}x{k}: worst err/bound {worst:.3}", t.name());
        }
    }
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
