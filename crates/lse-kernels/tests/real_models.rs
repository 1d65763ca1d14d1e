//! Kernels on real weights: for every weight type in the three test models, 64 rows of one tensor
//! times random activations. Scalar matmul = f64 math on the decoded operands (within f32
//! rounding), SIMD matmul = scalar within the stated bound. Skips (printing why) when a model
//! cannot be had.

mod common;

use common::*;
use lse_kernels::quant::{dot_type, quantize_activation};
use lse_kernels::{matmul, supports, Dialect, GgmlType, ThreadPool};
use std::collections::BTreeMap;

#[test]
fn real_model_tensors_every_type() {
    let pool = ThreadPool::new(2);
    for (name, f) in test_models() {
        // one tensor per type (the first 2-D one), plus a census
        let mut census: BTreeMap<&str, usize> = BTreeMap::new();
        let mut pick: BTreeMap<&str, usize> = BTreeMap::new();
        for (i, t) in f.tensors().iter().enumerate() {
            *census.entry(t.ggml_type.name()).or_default() += 1;
            if t.dims.len() == 2 {
                pick.entry(t.ggml_type.name()).or_insert(i);
            }
        }
        println!("{name}: tensor types {census:?}");
        let mut rng = Rng::new(77);
        for (&tn, &i) in &pick {
            let ti = &f.tensors()[i];
            let t: GgmlType = ti.ggml_type;
            assert!(supports(t), "{name}: {} has unsupported type {tn}", ti.name);
            let k = ti.dims[0] as usize;
            let n = (ti.dims[1] as usize).min(64);
            let rb = t.row_bytes(k).unwrap();
            let w = &f.tensor_data(ti)[..n * rb];
            let m = 5;
            let x = random_acts(&mut rng, m, k);
            let mut ys = vec![0f32; m * n];
            let mut yv = vec![0f32; m * n];
            matmul(Dialect::Scalar, &pool, t, w, n, k, &x, m, &mut ys);
            matmul(Dialect::Simd, &pool, t, w, n, k, &x, m, &mut yv);
            let dt = dot_type(t).unwrap();
            let mut worst_math = 0f64;
            let mut worst_simd = 0f64;
            for i in 0..m {
                let mut qx = vec![0u8; dt.row_bytes(k)];
                quantize_activation(dt, &x[i * k..(i + 1) * k], &mut qx);
                for r in 0..n {
                    let (exact, mag) = reference_dot(t, &w[r * rb..(r + 1) * rb], &qx, k);
                    let mag = mag + 1e-30;
                    let es = (ys[i * n + r] as f64 - exact).abs() / mag;
                    let ev = (yv[i * n + r] as f64 - ys[i * n + r] as f64).abs() / mag;
                    assert!(
                        es <= 1e-5,
                        "{name} {} ({tn}) y[{i}][{r}]: scalar {} vs exact {exact}",
                        ti.name,
                        ys[i * n + r]
                    );
                    assert!(
                        ev <= 2e-5,
                        "{name} {} ({tn}) y[{i}][{r}]: simd {} vs scalar {}",
                        ti.name,
                        yv[i * n + r],
                        ys[i * n + r]
                    );
                    worst_math = worst_math.max(es);
                    worst_simd = worst_simd.max(ev);
                }
            }
            println!(
                "{name}: {tn:5} {} [{k} x {n}] ok: |scalar-exact| {worst_math:.1e}, |simd-scalar| {worst_simd:.1e} (relative to sum|wx|)",
                ti.name
            );
        }
    }
}
