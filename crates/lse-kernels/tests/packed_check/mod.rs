//! The packed matmul check shared by `packed.rs` (best level) and `packed_avx2.rs` (capped).

use crate::common::*;

#[path = "../../src/packed/saturate.rs"]
mod saturate;
use lse_kernels::{matmul, matmul_packed, packable, Dialect, GgmlType, PackedMatrix, ThreadPool};

pub const PACKED: &[GgmlType] = &lse_kernels::packed::PACKED_TYPES;

/// Every packable type, several shapes and thread counts, against the scalar reference.
pub fn packed_matmul_matches_scalar() {
    if !PACKED.iter().all(|&t| packable(t)) {
        println!("packed kernels not available on this CPU: skipped");
        return;
    }
    let pools = [ThreadPool::new(1), ThreadPool::new(2), ThreadPool::new(3)];
    let mut rng = Rng::new(77);
    let shapes = [(37usize, 11usize, 320usize), (16, 1, 32), (301, 67, 512), (13, 203, 96), (64, 9, 576), (40, 100, 2560)];
    for &t in PACKED {
        // extreme blocks with few rows (quants rebuilt in registers) and with more than 16 (the
        // AVX2 tile's unpacked bytes); 24 weight rows: one group of both halves, one of one
        for (case, (n, m, k)) in shapes.into_iter().chain([(24, 10, 256), (24, 20, 256)]).enumerate() {
            let extreme = case >= shapes.len();
            let k = if t.block_size() == 256 { k.div_ceil(256) * 256 } else { k };
            let mut w = random_weights(&mut rng, t, n, k);
            let mut x = random_acts(&mut rng, m, k);
            if extreme {
                saturate::saturate_weights(t, &mut w);
                saturate::saturate_acts(&mut x);
            }
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

