//! RMS normalisation over rows, with ggml's numerics: f32 squares summed in f64, then
//! `scale = 1 / sqrtf(mean + eps)` in f32, `y = x * scale * w`.

/// Normalises each row of `dim` elements of `x` in place and multiplies by `w` (when given).
pub fn rms_norm(x: &mut [f32], dim: usize, w: Option<&[f32]>, eps: f32) {
    if dim == 0 {
        return;
    }
    for row in x.chunks_exact_mut(dim) {
        let mut sum = 0.0f64;
        for &v in row.iter() {
            sum += (v * v) as f64;
        }
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
}
