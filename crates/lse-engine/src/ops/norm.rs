//! RMS normalisation over rows, with ggml's numerics: f32 squares summed in f64, then
//! `scale = 1 / sqrtf(mean + eps)` in f32, `y = x * scale * w`. ggml adds the squares in one
//! chain; here each row adds them on eight lanes (see [`sum_of_squares`]). Both sums of n
//! positive terms lie within ~n·2⁻⁵³ of the exact one (576 terms: ~2⁻⁴⁴, against the f32
//! spacing of 2⁻²³), so they round to the same f32 mean unless it lies that close to a rounding
//! boundary.

/// Normalises each row of `dim` elements of `x` in place and multiplies by `w` (when given).
pub fn rms_norm(x: &mut [f32], dim: usize, w: Option<&[f32]>, eps: f32) {
    if dim == 0 {
        return;
    }
    for row in x.chunks_exact_mut(dim) {
        let sum = sum_of_squares(row);
        scale_row(row, sum, dim, w, eps);
    }
}

/// `Σ x²` of a row: f32 squares added in f64 on eight lanes (element d on lane d mod 8, each
/// lane in element order), then the lanes pairwise. One chain of dependent f64 adds took a
/// decode step's 61 norms ~1 µs each (SmolLM2's 576 elements), 2 % of the step on Zen 4.
#[inline(always)]
fn sum_of_squares(row: &[f32]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = row.chunks_exact(8);
    for c in chunks.by_ref() {
        for (l, &v) in lanes.iter_mut().zip(c) {
            *l += (v * v) as f64;
        }
    }
    for (l, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *l += (v * v) as f64;
    }
    ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]))
}

/// `row · 1/sqrtf(mean + eps) · w`.
#[inline(always)]
fn scale_row(row: &mut [f32], sum: f64, dim: usize, w: Option<&[f32]>, eps: f32) {
    let mean = (sum / dim as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    match w {
        Some(w) => {
            for (v, g) in row.iter_mut().zip(w) {
                *v = (*v * scale) * g;
            }
        }
        None => {
            for v in row.iter_mut() {
                *v *= scale;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unit_rms() {
        let mut x = vec![3.0f32, 4.0, 0.0, 0.0];
        super::rms_norm(&mut x, 2, Some(&[1.0, 2.0]), 1e-6);
        let s = (12.5f32 + 1e-6).sqrt();
        assert!((x[0] - 3.0 / s).abs() < 1e-6 && (x[1] - 8.0 / s).abs() < 1e-6);
        assert_eq!(&x[2..], &[0.0, 0.0]);
    }

    /// Each row gives the bits of ggml's order (its squares added in one chain, written out
    /// here): the eight lanes round to the same f32 mean (widths with and without a remainder).
    #[test]
    fn lanes_give_the_one_chain_result() {
        for dim in [37, 576, 2048] {
            let x: Vec<f32> = (0..19 * dim).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.0137).collect();
            let w: Vec<f32> = (0..dim).map(|i| 0.5 + i as f32 * 0.01).collect();
            let mut all = x.clone();
            super::rms_norm(&mut all, dim, Some(&w), 1e-6);
            for (r, row) in x.chunks_exact(dim).enumerate() {
                let mut sum = 0.0f64;
                for &v in row {
                    sum += (v * v) as f64;
                }
                let scale = 1.0 / ((sum / dim as f64) as f32 + 1e-6).sqrt();
                for d in 0..dim {
                    assert_eq!(all[r * dim + d].to_bits(), ((row[d] * scale) * w[d]).to_bits(), "dim {dim} row {r} element {d}");
                }
            }
        }
    }
}
