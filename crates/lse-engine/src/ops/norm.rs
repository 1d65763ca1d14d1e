//! RMS normalisation over rows, with ggml's numerics: f32 squares summed in f64, then
//! `scale = 1 / sqrtf(mean + eps)` in f32, `y = x * scale * w`.

/// Normalises each row of `dim` elements of `x` in place and multiplies by `w` (when given).
pub fn rms_norm(x: &mut [f32], dim: usize, w: Option<&[f32]>, eps: f32) {
    if dim == 0 {
        return;
    }
    // Each row's f64 sum is one chain of dependent adds; eight rows side by side keep the
    // adder busy (every row's own sum still runs in element order).
    let mut groups = x.chunks_exact_mut(dim * GROUP);
    for g in groups.by_ref() {
        let sums = sums_of_squares::<GROUP>(g, dim);
        for (row, sum) in g.chunks_exact_mut(dim).zip(sums) {
            scale_row(row, sum, dim, w, eps);
        }
    }
    for row in groups.into_remainder().chunks_exact_mut(dim) {
        let [sum] = sums_of_squares::<1>(row, dim);
        scale_row(row, sum, dim, w, eps);
    }
}

/// Rows normalised together.
const GROUP: usize = 8;

/// `Σ x²` of each of the `R` rows of `x` (f32 squares added in f64, in element order).
#[allow(clippy::needless_range_loop)] // the element index walks R rows in step
#[inline(always)]
fn sums_of_squares<const R: usize>(x: &[f32], dim: usize) -> [f64; R] {
    let rows: [&[f32]; R] = core::array::from_fn(|r| &x[r * dim..(r + 1) * dim]);
    let mut sum = [0.0f64; R];
    for d in 0..dim {
        for r in 0..R {
            let v = rows[r][d];
            sum[r] += (v * v) as f64;
        }
    }
    sum
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

    /// Rows normalised eight at a time give the bits of rows normalised one by one (the sum of
    /// each row in element order, as written out here).
    #[test]
    fn grouped_rows_equal_single_rows() {
        let dim = 37;
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
                assert_eq!(all[r * dim + d].to_bits(), ((row[d] * scale) * w[d]).to_bits(), "row {r} element {d}");
            }
        }
    }
}
