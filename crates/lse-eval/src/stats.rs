//! Running sums and the statistics of SPEC §4/§5.2.

/// Sum and sum of squares of a per-token quantity, in f64.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Moments {
    pub n: usize,
    pub sum: f64,
    pub sum_sq: f64,
}

impl Moments {
    pub fn add(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        self.sum_sq += x * x;
    }
    /// Adds another run of the same quantity (its count, sum and sum of squares), in f64.
    pub fn merge(&mut self, o: &Moments) {
        self.n += o.n;
        self.sum += o.sum;
        self.sum_sq += o.sum_sq;
    }
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum / self.n as f64
        }
    }
    /// Standard error of the mean: `sqrt((E[x^2] - E[x]^2) / (N - 1))`; 0 when N < 2 or the variance is not positive.
    pub fn sem(&self) -> f64 {
        if self.n < 2 {
            return 0.0;
        }
        let n = self.n as f64;
        let m = self.sum / n;
        let var = self.sum_sq / n - m * m;
        if var > 0.0 {
            (var / (n - 1.0)).sqrt()
        } else {
            0.0
        }
    }
}

/// llama.cpp's percentile of a sorted slice: `p = phi*(n-1)` (in f32), linear interpolation between
/// the two neighbours.
pub fn percentile(sorted: &[f64], phi: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    if phi <= 0.0 {
        return sorted[0];
    }
    if phi >= 1.0 {
        return sorted[sorted.len() - 1];
    }
    let p = phi as f32 * (sorted.len() - 1) as f32;
    let k = p.floor();
    let w = (p - k) as f64;
    let k = k as usize;
    let k1 = (k + 1).min(sorted.len() - 1);
    (1.0 - w) * sorted[k] + w * sorted[k1]
}

/// Natural log-probability from a reduction's parts, all in f64 (llama.cpp forms `l - max` in f32:
/// at most half an f32 ulp of the difference apart, far below its printed digits).
#[inline]
pub fn log_prob(logit: f32, max: f32, ln_sum_exp: f64) -> f64 {
    (logit as f64 - max as f64) - ln_sum_exp
}

/// The K+1-outcome KL divergence of SPEC §5.2. `base_logp[i]` and `this_logp[i]` are the log-probs of
/// the base's top-K ids under the base and under this run.
pub fn kld_top_k(base_logp: &[f64], this_logp: &[f64]) -> (f64, f64) {
    const TINY: f64 = 1e-30;
    let mut kld = 0.0;
    let mut p_top = 0.0;
    let mut q_top = 0.0;
    for (&lp, &lq) in base_logp.iter().zip(this_logp) {
        let p = lp.exp();
        p_top += p;
        q_top += lq.exp();
        if p > 0.0 {
            kld += p * (lp - lq);
        }
    }
    let p_rest = 1.0 - p_top;
    if p_rest > 0.0 {
        let q_rest = (1.0 - q_top).max(TINY);
        kld += p_rest * (p_rest.max(TINY).ln() - q_rest.ln());
    }
    (kld, p_top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments() {
        let mut m = Moments::default();
        for x in [1.0, 2.0, 3.0, 4.0] {
            m.add(x);
        }
        assert_eq!(m.mean(), 2.5);
        // population variance 1.25, /(N-1)=3 -> sqrt(1.25/3)
        assert!((m.sem() - (1.25f64 / 3.0).sqrt()).abs() < 1e-15);
        let mut one = Moments::default();
        one.add(5.0);
        assert_eq!(one.sem(), 0.0);
    }

    #[test]
    fn percentile_interpolates() {
        let x: Vec<f64> = (0..101).map(|i| i as f64).collect();
        assert!((percentile(&x, 0.99) - 99.0).abs() < 1e-4);
        let x = [0.0, 10.0];
        assert!((percentile(&x, 0.99) - 9.9).abs() < 1e-5);
        assert_eq!(percentile(&x, 1.0), 10.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
    }

    #[test]
    fn kld_top_k_matches_coarsened_distributions() {
        // P = (0.5, 0.3 | rest 0.2), Q = (0.4, 0.4 | rest 0.2)
        let p = [0.5f64.ln(), 0.3f64.ln()];
        let q = [0.4f64.ln(), 0.4f64.ln()];
        let (k, mass) = kld_top_k(&p, &q);
        let want = 0.5 * (0.5f64 / 0.4).ln() + 0.3 * (0.3f64 / 0.4).ln() + 0.0;
        assert!((k - want).abs() < 1e-12, "{k} vs {want}");
        assert!((mass - 0.8).abs() < 1e-12);
        // rest differs: P rest 0.2, Q rest 0.1
        let q = [0.5f64.ln(), 0.4f64.ln()];
        let (k, _) = kld_top_k(&p, &q);
        let want = 0.3 * (0.3f64 / 0.4).ln() + 0.2 * (0.2f64 / 0.1).ln();
        assert!((k - want).abs() < 1e-12);
        // identical -> 0
        assert!(kld_top_k(&p, &p).0.abs() < 1e-15);
    }
}
