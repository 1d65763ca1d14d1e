//! The scalar dots against exact math on the decoded operands, and matmul (scalar and SIMD,
//! 1 and 2 threads, odd sizes) against the scalar dots.

mod common;

use common::*;
use lse_kernels::quant::{dot_type, quantize_activation, scalar_dot_fn};
use lse_kernels::{device_arch, matmul, Dialect, GgmlType, ThreadPool};

fn k_for(t: GgmlType) -> usize {
    if t.block_size() >= 128 {
        768
    } else {
        320
    }
}

/// Scalar dot of every type = Σ w_i·x_i over the decoded weight row and the decoded quantized
/// activation row, computed in f64 (for Q8_1 activations with the stored block sums, see
/// `common::reference_dot`). The kernel's integer sums are exact, so the only error is
/// the f32 arithmetic on scales and partial sums: bound 1e-5·Σ|w_i·x_i| + 1e-6.
#[test]
fn scalar_dot_equals_decoded_math() {
    let mut rng = Rng::new(11);
    for t in types() {
        let k = k_for(t);
        let dt = dot_type(t).unwrap();
        let dot = scalar_dot_fn(t).unwrap();
        let w = random_weights(&mut rng, t, 8, k);
        let x = random_acts(&mut rng, 3, k);
        let rb = t.row_bytes(k).unwrap();
        let mut worst = 0f64;
        for r in 0..8 {
            for i in 0..3 {
                let mut qx = vec![0u8; dt.row_bytes(k)];
                quantize_activation(dt, &x[i * k..(i + 1) * k], &mut qx);
                let (exact, mag) = reference_dot(t, &w[r * rb..(r + 1) * rb], &qx, k);
                let got = dot(&w[r * rb..(r + 1) * rb], &qx) as f64;
                let err = (got - exact).abs();
                assert!(
                    err <= 1e-5 * mag + 1e-6,
                    "{}: row {r} act {i}: {got} vs exact {exact} (mag {mag})",
                    t.name()
                );
                worst = worst.max(err / mag.max(1e-30));
            }
        }
        println!("{:5}: scalar dot rel err (vs Σ|wx|) {worst:.2e}", t.name());
    }
}

/// Absolute error bound for a SIMD result: its integer block sums equal the scalar's, only the
/// f32 summation order of the per-block (scale × integer) terms differs: 2e-5 relative to
/// the sum of magnitudes, estimated from the decoded operands.
fn bound(t: GgmlType, w: &[u8], r: usize, k: usize, x: &[f32]) -> f32 {
    2e-5 * row_mag(t, w, r, k, x) * 1.1 + 1e-6
}

#[test]
fn matmul_matches_scalar_reference_all_types() {
    println!("Simd dialect runs {}", device_arch(Dialect::Simd));
    let pools = [ThreadPool::new(1), ThreadPool::new(2)];
    let mut rng = Rng::new(23);
    for t in types() {
        let k = k_for(t);
        // odd sizes: n and m not multiples of any tile
        let (n, m) = (37, 11);
        let w = random_weights(&mut rng, t, n, k);
        let x = random_acts(&mut rng, m, k);
        let want = reference_matmul(t, &w, n, k, &x, m);
        // Scalar dialect: bit-identical to the per-element scalar dot, for 1 and 2 threads.
        for p in &pools {
            let mut y = vec![f32::NAN; m * n];
            matmul(Dialect::Scalar, p, t, &w, n, k, &x, m, &mut y);
            assert_eq!(
                y,
                want,
                "{} scalar matmul, {} threads",
                t.name(),
                p.threads()
            );
        }
        // Simd dialect: identical for 1 and 2 threads, within the bound of the scalar result.
        let mut y1 = vec![f32::NAN; m * n];
        matmul(Dialect::Simd, &pools[0], t, &w, n, k, &x, m, &mut y1);
        let mut y2 = vec![f32::NAN; m * n];
        matmul(Dialect::Simd, &pools[1], t, &w, n, k, &x, m, &mut y2);
        assert_eq!(
            y1,
            y2,
            "{} simd matmul differs between 1 and 2 threads",
            t.name()
        );
        let mut worst = 0f32;
        for i in 0..m {
            for r in 0..n {
                let b = bound(t, &w, r, k, &x[i * k..(i + 1) * k]);
                let e = (y1[i * n + r] - want[i * n + r]).abs();
                assert!(
                    e <= b,
                    "{} simd y[{i}][{r}] = {} vs scalar {} (bound {b})",
                    t.name(),
                    y1[i * n + r],
                    want[i * n + r]
                );
                worst = worst.max(e / b);
            }
        }
        println!(
            "{:5}: simd matmul {n}x{m}x{k} ok, worst err/bound {worst:.3}",
            t.name()
        );
    }
}

#[test]
fn matmul_larger_sizes_and_threads() {
    let pools = [
        ThreadPool::new(1),
        ThreadPool::new(2),
        ThreadPool::new(3),
        ThreadPool::new(8),
    ];
    let mut rng = Rng::new(5);
    // (301 x 67): splits over weight rows; (13 x 203): few weight rows, so the activation rows
    // are split too — results must not depend on either split.
    for (t, n, m) in [
        (GgmlType::Q4_K, 301, 67),
        (GgmlType::Q8_0, 301, 67),
        (GgmlType::Q4_1, 301, 67),
        (GgmlType::Q6_K, 13, 203),
        (GgmlType::F16, 301, 67),
        (GgmlType::Q5_0, 13, 203),
    ] {
        let k = 512;
        let w = random_weights(&mut rng, t, n, k);
        let x = random_acts(&mut rng, m, k);
        let mut per_dialect = Vec::new();
        for d in [Dialect::Scalar, Dialect::Simd] {
            let mut first: Option<Vec<f32>> = None;
            for p in &pools {
                let mut y = vec![f32::NAN; m * n];
                matmul(d, p, t, &w, n, k, &x, m, &mut y);
                assert!(y.iter().all(|v| v.is_finite()));
                match &first {
                    None => first = Some(y),
                    Some(f) => assert_eq!(
                        &y,
                        f,
                        "{} {d:?}: {} threads differ from 1",
                        t.name(),
                        p.threads()
                    ),
                }
            }
            per_dialect.push(first.unwrap());
        }
        assert_eq!(
            per_dialect[0],
            reference_matmul(t, &w, n, k, &x, m),
            "{} scalar matmul vs per-element dots",
            t.name()
        );
        for i in 0..m {
            for r in 0..n {
                let b = bound(t, &w, r, k, &x[i * k..(i + 1) * k]);
                let (sc, si) = (per_dialect[0][i * n + r], per_dialect[1][i * n + r]);
                assert!(
                    (sc - si).abs() <= b,
                    "{} y[{i}][{r}]: simd {si} vs scalar {sc}",
                    t.name()
                );
            }
        }
    }
}
