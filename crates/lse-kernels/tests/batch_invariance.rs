//! Batch invariance: a row's matmul output is bit-identical whatever the number of rows in the
//! call, its place among them, and the thread count (the engine's promise to sessions that share
//! a forward pass).

mod common;

use common::*;
use lse_kernels::{matmul, matmul_packed, packable, Dialect, PackedMatrix, ThreadPool};

fn rows_of(y: &[f32], n: usize, i: usize) -> &[f32] {
    &y[i * n..(i + 1) * n]
}

#[test]
fn matmul_rows_do_not_depend_on_row_count() {
    let pools = [ThreadPool::new(1), ThreadPool::new(2)];
    let mut rng = Rng::new(5);
    for t in types() {
        let (n, k) = (301usize, if t.block_size() >= 128 { 512 } else { 320 });
        let w = random_weights(&mut rng, t, n, k);
        let m_all = 67;
        let x = random_acts(&mut rng, m_all, k);
        for d in [Dialect::Scalar, Dialect::Simd] {
            let mut all = vec![f32::NAN; m_all * n];
            matmul(d, &pools[1], t, &w, n, k, &x, m_all, &mut all);
            for (pool, i0, m) in [(0, 0, 1), (1, 5, 1), (1, 66, 1), (0, 3, 7), (1, 17, 33), (1, 0, 16), (1, 34, 32)] {
                let mut y = vec![f32::NAN; m * n];
                matmul(d, &pools[pool], t, &w, n, k, &x[i0 * k..(i0 + m) * k], m, &mut y);
                for i in 0..m {
                    assert!(
                        rows_of(&y, n, i).iter().zip(rows_of(&all, n, i0 + i)).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{} {d:?}: row {} differs when run with {m} rows",
                        t.name(),
                        i0 + i
                    );
                }
            }
            if d == Dialect::Simd && packable(t) {
                let Some(p) = PackedMatrix::new(&pools[1], t, &w, n, k) else { continue };
                let mut all = vec![f32::NAN; m_all * n];
                matmul_packed(&pools[1], &p, &x, m_all, &mut all);
                for (pool, i0, m) in [(0, 0, 1), (1, 5, 1), (1, 66, 1), (0, 3, 7), (1, 17, 33), (1, 0, 16), (1, 34, 32)] {
                    let mut y = vec![f32::NAN; m * n];
                    matmul_packed(&pools[pool], &p, &x[i0 * k..(i0 + m) * k], m, &mut y);
                    for i in 0..m {
                        assert!(
                            rows_of(&y, n, i).iter().zip(rows_of(&all, n, i0 + i)).all(|(a, b)| a.to_bits() == b.to_bits()),
                            "{} packed: row {} differs when run with {m} rows",
                            t.name(),
                            i0 + i
                        );
                    }
                }
            }
        }
    }
}
