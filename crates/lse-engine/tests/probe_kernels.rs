//! Scratch probe (ignored): kernels matmul vs dequantized weights x Q8_0-rounded activations, on
//! every matrix of the quantized synthetic models.
use lse_gguf::{GgmlType, GgufFile};
use lse_kernels::{Dialect, ThreadPool};

#[test]
#[ignore]
fn q8_activation_probe() {
    for name in ["llama-tiny-q8_0", "llama-tiny-q4_0"] {
        let f = GgufFile::open(&lse_testdata::shared(&format!("golden/synthetic/{name}.gguf"))).unwrap();
        let pool = ThreadPool::new(2);
        let mut s = 1u64;
        let mut r = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        for t in f.tensors() {
            if t.dims.len() != 2 || t.ggml_type == GgmlType::F32 {
                continue;
            }
            let (k, n) = (t.dims[0] as usize, t.dims[1] as usize);
            let m = 7;
            let w = f.tensor_data(t);
            let rb = t.ggml_type.row_bytes(k).unwrap();
            let mut wd = vec![0f32; n * k];
            for (src, dst) in w.chunks(rb).zip(wd.chunks_mut(k)) {
                lse_kernels::dequantize_row(t.ggml_type, src, dst);
            }
            let x: Vec<f32> = (0..m * k).map(|i| if i % k == 0 { 12.0 } else { r() }).collect();
            let mut xq = vec![0u8; 34 * k / 32 * m];
            for (src, dst) in x.chunks(k).zip(xq.chunks_mut(34 * k / 32)) {
                lse_kernels::quant::quantize_activation(lse_kernels::quant::DotType::Q8_0, src, dst);
            }
            let mut xd = vec![0f32; k * m];
            for (src, dst) in xq.chunks(34 * k / 32).zip(xd.chunks_mut(k)) {
                lse_kernels::dequantize_row(GgmlType::Q8_0, src, dst);
            }
            for d in [Dialect::Simd, Dialect::Scalar] {
                let mut y = vec![0f32; n * m];
                lse_kernels::matmul(d, &pool, t.ggml_type, w, n, k, &x, m, &mut y);
                let (mut e1, mut e2) = (0f64, 0f64);
                for rr in 0..m {
                    for j in 0..n {
                        let exact: f64 = (0..k).map(|i| wd[j * k + i] as f64 * x[rr * k + i] as f64).sum();
                        let quant: f64 = (0..k).map(|i| wd[j * k + i] as f64 * xd[rr * k + i] as f64).sum();
                        e1 = e1.max((y[rr * n + j] as f64 - exact).abs());
                        e2 = e2.max((y[rr * n + j] as f64 - quant).abs());
                    }
                }
                eprintln!("{name} {} {:?} [{k}x{n}] {d:?}: max err vs f32-x {e1:.2e}, vs q8-x {e2:.2e}", t.name, t.ggml_type);
            }
        }
    }
}
