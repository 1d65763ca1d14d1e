//! The sampler chain, in llama.cpp's order: logit bias, penalties (over the last `repeat_last_n`
//! tokens of the session, prompt included), top-k, top-p, min-p, temperature, then a seeded draw.
//! A temperature of 0 takes the most likely token after the bias and penalties (ties: the lower id).

use super::request::SamplingParams;

/// Sets the logits of `ids` (those inside the row) to −∞: tokens that may not be drawn.
pub(crate) fn ban(row: &mut [f32], ids: &[u32]) {
    for &id in ids {
        if let Some(l) = row.get_mut(id as usize) {
            *l = f32::NEG_INFINITY;
        }
    }
}

/// splitmix64: small, fast, and the same sequence on every platform.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 bits.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The longest top-k taken by the vector scan (its list insertion is linear in k).
const SCAN_TOP_K: usize = 256;

pub struct Sampler {
    p: SamplingParams,
    rng: Rng,
    /// The original values of the entries [`Sampler::sample_in_place`] changes (reused).
    saved: Vec<(u32, f32)>,
    /// When kept ([`Sampler::keeping_candidates`]): the last draw's final candidates and their
    /// probabilities, most likely first.
    kept: Option<Vec<(u32, f64)>>,
}

impl Sampler {
    pub fn new(p: &SamplingParams) -> Sampler {
        let seed = p.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            t ^ (std::process::id() as u64).rotate_left(32)
        });
        Sampler { p: p.clone(), rng: Rng(seed), saved: Vec::new(), kept: None }
    }

    /// Makes each draw keep its final candidates for [`Sampler::candidates_kept`].
    pub fn keeping_candidates(mut self) -> Sampler {
        self.kept = Some(Vec::new());
        self
    }

    /// Whether draws keep their candidates (a request that reports them).
    pub fn keeps_candidates(&self) -> bool {
        self.kept.is_some()
    }

    /// The candidates the last draw chose among (after top-k, top-p and min-p) with their
    /// probabilities at the temperature, most likely first; greedy: the pick alone, 1. Empty
    /// unless [`Sampler::keeping_candidates`].
    pub fn candidates_kept(&self) -> &[(u32, f64)] {
        self.kept.as_deref().unwrap_or(&[])
    }

    fn keep(&mut self, cand: impl Iterator<Item = (u32, f64)>) {
        if let Some(k) = &mut self.kept {
            k.clear();
            k.extend(cand);
        }
    }

    /// The tokens of `history` (the session's tokens, oldest first) the penalties count: the last
    /// `repeat_last_n` (all for −1), none when every penalty is neutral.
    fn window<'h>(&self, history: &'h [u32]) -> &'h [u32] {
        let p = &self.p;
        let n = match p.repeat_last_n {
            0 => 0,
            -1 => history.len(),
            n => (n as usize).min(history.len()),
        };
        if p.repeat_penalty == 1.0 && p.presence_penalty == 0.0 && p.frequency_penalty == 0.0 {
            return &[];
        }
        &history[history.len() - n..]
    }

    /// Applies the repeat, presence and frequency penalties to `logits` for the tokens in
    /// `history` (the session's tokens, oldest first).
    fn penalize(&self, logits: &mut [f32], history: &[u32]) {
        let p = &self.p;
        let window = self.window(history);
        if window.is_empty() {
            return;
        }
        // each distinct token once, with its count (sorted on the stack for the default window)
        let mut sorted: smallvec::SmallVec<[u32; 64]> = window.into();
        sorted.sort_unstable();
        for run in sorted.chunk_by(|a, b| a == b) {
            let (t, c) = (run[0], run.len());
            let Some(l) = logits.get_mut(t as usize) else { continue };
            if *l <= 0.0 {
                *l *= p.repeat_penalty;
            } else {
                *l /= p.repeat_penalty;
            }
            *l -= c as f32 * p.frequency_penalty + p.presence_penalty;
        }
    }

    /// Whether some token of `logits` is open and not banned by the bias ([`super::logit_bias::leaves_any`]).
    pub fn leaves_any(&self, logits: &[f32]) -> bool {
        super::logit_bias::leaves_any(&self.p.logit_bias, logits)
    }

    /// Greedy with no bias and every penalty off: the pick is the row's argmax.
    pub fn is_plain_greedy(&self) -> bool {
        let p = &self.p;
        p.temperature <= 0.0 && p.logit_bias.is_empty() && (p.repeat_last_n == 0 || (p.repeat_penalty == 1.0 && p.presence_penalty == 0.0 && p.frequency_penalty == 0.0))
    }

    /// Picks the next token from `logits` (modified in place) given the session's tokens.
    pub fn sample(&mut self, logits: &mut [f32], history: &[u32]) -> u32 {
        self.sample_with_margin(logits, history).0
    }

    /// [`Sampler::sample_with_margin`] on `row` itself after setting the `bans` to −∞: every
    /// entry the chain changes (the bans, the bias, the penalties) is put back before it
    /// returns, so `row` is left as it came, without a copy of a vocabulary-sized row per step.
    pub fn sample_in_place(&mut self, row: &mut [f32], history: &[u32], bans: &[u32]) -> (u32, f64) {
        let mut saved = std::mem::take(&mut self.saved);
        saved.clear();
        let touched = bans.iter().chain(self.p.logit_bias.keys()).chain(self.window(history));
        saved.extend(touched.filter_map(|&id| row.get(id as usize).map(|&l| (id, l))));
        ban(row, bans);
        let picked = self.sample_with_margin(row, history);
        for &(id, l) in &saved {
            row[id as usize] = l;
        }
        self.saved = saved;
        picked
    }

    /// `sample`, plus for greedy decoding the gap between the chosen logit and the next best one
    /// after the bias and penalties (how close the choice was; infinite when sampling).
    pub fn sample_with_margin(&mut self, logits: &mut [f32], history: &[u32]) -> (u32, f64) {
        super::logit_bias::apply(&self.p.logit_bias, logits);
        self.penalize(logits, history);
        if self.p.temperature <= 0.0 {
            let best = argmax(logits);
            let second = logits.iter().enumerate().filter(|&(i, _)| i != best as usize).map(|(_, &l)| l).fold(f32::NEG_INFINITY, f32::max);
            self.keep(std::iter::once((best, 1.0)));
            return (best, (logits[best as usize] - second) as f64);
        }
        (self.draw(logits), f64::INFINITY)
    }

    /// The top-k candidates, most likely first (ties: the lower id). Up to [`SCAN_TOP_K`] of them
    /// come from the LM-head reductions' vector scan, which keeps a short list and skips every
    /// logit below its last entry: a Gemma-3 row (262144 logits) in a fraction of the time a
    /// selection over all of them took. Banned tokens (−∞) never enter the scan; they carry no
    /// probability, so the draw is the same.
    fn candidates(&self, logits: &[f32]) -> Vec<(u32, f32)> {
        let k = self.p.top_k as usize;
        if k > 0 && k <= SCAN_TOP_K && k < logits.len() {
            let top = lse_kernels::reduce::top_k(lse_kernels::Dialect::Simd, logits, k);
            if !top.is_empty() {
                return top;
            }
        }
        let mut cand: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        let by_logit = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        if k > 0 && k < cand.len() {
            cand.select_nth_unstable_by(k - 1, by_logit);
            cand.truncate(k);
        }
        cand.sort_unstable_by(by_logit);
        cand
    }

    fn draw(&mut self, logits: &[f32]) -> u32 {
        let mut cand = self.candidates(logits);
        if self.p.top_p < 1.0 {
            let probs = softmax(&cand, 1.0);
            let mut cum = 0.0;
            let mut keep = cand.len();
            for (i, &pr) in probs.iter().enumerate() {
                cum += pr;
                if cum >= self.p.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            cand.truncate(keep.max(1));
        }
        if self.p.min_p > 0.0 {
            let floor = cand[0].1 + self.p.min_p.ln();
            let keep = cand.iter().take_while(|c| c.1 >= floor).count();
            cand.truncate(keep.max(1));
        }
        let probs = softmax(&cand, self.p.temperature);
        self.keep(cand.iter().zip(&probs).map(|(c, &p)| (c.0, p)));
        let u = self.rng.unit();
        let mut cum = 0.0;
        for (c, pr) in cand.iter().zip(&probs) {
            cum += pr;
            if u < cum {
                return c.0;
            }
        }
        cand[cand.len() - 1].0
    }
}

/// Index of the largest value, the lower index on ties.
pub fn argmax(x: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in x.iter().enumerate() {
        if v > x[best] {
            best = i;
        }
    }
    best as u32
}

/// Probabilities of `cand` (sorted, most likely first) at temperature `t`, in f64.
fn softmax(cand: &[(u32, f32)], t: f32) -> Vec<f64> {
    let m = cand[0].1 as f64 / t as f64;
    let e: Vec<f64> = cand.iter().map(|c| (c.1 as f64 / t as f64 - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SamplingParams {
        SamplingParams { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, ..Default::default() }
    }

    #[test]
    fn greedy_takes_the_lower_id_on_ties() {
        let mut s = Sampler::new(&params());
        assert_eq!(s.sample(&mut [1.0, 3.0, 3.0, -1.0], &[]), 1);
    }

    #[test]
    fn repeat_penalty_divides_positive_and_multiplies_negative_logits() {
        let p = SamplingParams { repeat_penalty: 2.0, ..params() };
        let s = Sampler::new(&p);
        let mut l = [4.0, -1.0, 3.0];
        s.penalize(&mut l, &[0, 1, 0]);
        assert_eq!(l, [2.0, -2.0, 3.0]);
        let mut s = Sampler::new(&p);
        assert_eq!(s.sample(&mut [4.0, -1.0, 3.0], &[0]), 2);
    }

    #[test]
    fn bias_comes_before_the_penalties_and_can_ban_the_argmax() {
        // token 0: (1 + 3) / 2 = 2 with the bias first; 1 / 2 + 3 = 3.5 if it came after
        let p = SamplingParams { repeat_penalty: 2.0, logit_bias: [(0, 3.0)].into(), ..params() };
        let mut s = Sampler::new(&p);
        assert!(!s.is_plain_greedy());
        assert_eq!(s.sample_with_margin(&mut [1.0, 2.5, 0.0], &[0]), (1, 0.5));
        let p = SamplingParams { logit_bias: [(1, f32::NEG_INFINITY)].into(), ..params() };
        assert_eq!(Sampler::new(&p).sample(&mut [1.0, 2.5, 0.0], &[]), 0);
    }

    #[test]
    fn penalty_window_counts_only_the_last_n_tokens() {
        let p = SamplingParams { frequency_penalty: 1.0, presence_penalty: 0.5, repeat_last_n: 2, ..params() };
        let s = Sampler::new(&p);
        let mut l = [0.0f32; 3];
        s.penalize(&mut l, &[2, 0, 1, 1]);
        assert_eq!(l, [0.0, -2.5, 0.0]);
    }

    #[test]
    fn seeded_draws_repeat_and_follow_the_distribution() {
        let p = SamplingParams { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(7), ..Default::default() };
        let logits = [0.0f32, (3.0f32).ln(), f32::NEG_INFINITY];
        let draw = |n: usize| {
            let mut s = Sampler::new(&p);
            (0..n).map(|_| s.sample(&mut logits.clone(), &[])).collect::<Vec<_>>()
        };
        let a = draw(4000);
        assert_eq!(a, draw(4000));
        let ones = a.iter().filter(|&&t| t == 1).count() as f64 / 4000.0;
        assert!((ones - 0.75).abs() < 0.03, "P(1) = {ones}, want 0.75");
        assert!(!a.contains(&2));
    }

    /// The scanned top-k is the selection over all logits: the same ids in the same order, ties
    /// (many equal logits) to the lower id, banned tokens left out.
    #[test]
    fn scanned_top_k_equals_the_full_selection() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for k in [1usize, 2, 40, 256] {
            let logits: Vec<f32> = (0..5000)
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // coarse values, so ties are common; every 7th token banned
                    if i % 7 == 3 { f32::NEG_INFINITY } else { (x % 64) as f32 * 0.25 - 8.0 }
                })
                .collect();
            let s = Sampler::new(&SamplingParams { top_k: k as i64, ..params() });
            let mut all: Vec<(u32, f32)> = logits.iter().enumerate().filter(|p| p.1.is_finite()).map(|(i, &l)| (i as u32, l)).collect();
            all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            all.truncate(k);
            assert_eq!(s.candidates(&logits), all, "k = {k}");
        }
        // every token banned: the full list, as before
        let s = Sampler::new(&SamplingParams { top_k: 2, ..params() });
        assert_eq!(s.candidates(&[f32::NEG_INFINITY; 3]).len(), 2);
    }

    /// Sampling in place draws what the chain draws on a copy with the bans set, and leaves the
    /// row as it came.
    #[test]
    fn sampling_in_place_restores_the_row() {
        let row: Vec<f32> = (0..300).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.07).collect();
        let history: Vec<u32> = (0..90).map(|i| (i * 13 % 300) as u32).collect();
        let bans = [5u32, 250, 5];
        for (temperature, top_k) in [(0.0, 40), (0.8, 40), (1.0, 0), (1.3, 300)] {
            let p = SamplingParams {
                temperature,
                top_k,
                repeat_penalty: 1.3,
                frequency_penalty: 0.2,
                presence_penalty: 0.1,
                logit_bias: [(7, 2.0), (250, 1.0), (299, f32::NEG_INFINITY)].into(),
                seed: Some(3),
                ..Default::default()
            };
            let (mut a, mut b) = (Sampler::new(&p), Sampler::new(&p));
            let mut in_place = row.clone();
            for step in 0..50 {
                let mut copy = row.clone();
                for &t in &bans {
                    copy[t as usize] = f32::NEG_INFINITY;
                }
                let want = a.sample_with_margin(&mut copy, &history[..40 + step]);
                assert_eq!(b.sample_in_place(&mut in_place, &history[..40 + step], &bans), want, "t {temperature}, step {step}");
                assert!(in_place.iter().zip(&row).all(|(x, y)| x.to_bits() == y.to_bits()), "the row is restored");
            }
        }
    }

    /// The kept candidates are those the draw chose among, with probabilities at the
    /// temperature (worked out by hand: p² renormalised at t = 0.5); greedy keeps its pick at 1.
    #[test]
    fn kept_candidates_are_the_chains_last_list() {
        let logits = [(0.5f32).ln(), (0.3f32).ln(), (0.15f32).ln(), (0.05f32).ln()];
        let base = SamplingParams { temperature: 0.5, top_k: 0, top_p: 1.0, min_p: 0.0, seed: Some(2), ..Default::default() };
        let kept = |p: SamplingParams| {
            let mut s = Sampler::new(&p).keeping_candidates();
            let id = s.sample(&mut logits.clone(), &[]);
            (id, s.candidates_kept().to_vec())
        };
        let (id, k) = kept(SamplingParams { top_k: 2, ..base.clone() });
        let want = [(0u32, 0.25 / 0.34), (1, 0.09 / 0.34)];
        assert!(k.len() == 2 && k.iter().zip(&want).all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() < 1e-6), "{k:?}");
        assert!(id <= 1);
        // min-p 0.25 keeps tokens within a quarter of the best (0.5, 0.3, 0.15)
        let (_, k) = kept(SamplingParams { min_p: 0.25, ..base.clone() });
        assert_eq!(k.iter().map(|c| c.0).collect::<Vec<_>>(), [0, 1, 2]);
        assert!((k.iter().map(|c| c.1).sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(kept(SamplingParams { temperature: 0.0, ..base.clone() }), (0, vec![(0, 1.0)]));
        // not asked: nothing kept
        let mut s = Sampler::new(&base);
        s.sample(&mut logits.clone(), &[]);
        assert!(s.candidates_kept().is_empty());
    }

    #[test]
    fn top_k_top_p_and_min_p_cut_the_tail() {
        let logits = [(0.5f32).ln(), (0.3f32).ln(), (0.15f32).ln(), (0.05f32).ln()];
        let only = |p: SamplingParams| {
            let mut s = Sampler::new(&SamplingParams { temperature: 1.0, seed: Some(1), ..p });
            let mut seen: Vec<u32> = (0..2000).map(|_| s.sample(&mut logits.clone(), &[])).collect();
            seen.sort();
            seen.dedup();
            seen
        };
        let base = SamplingParams { top_k: 0, top_p: 1.0, min_p: 0.0, ..Default::default() };
        assert_eq!(only(SamplingParams { top_k: 2, ..base.clone() }), vec![0, 1]);
        assert_eq!(only(SamplingParams { top_p: 0.75, ..base.clone() }), vec![0, 1]);
        assert_eq!(only(SamplingParams { top_p: 0.81, ..base.clone() }), vec![0, 1, 2]);
        assert_eq!(only(SamplingParams { min_p: 0.5, ..base.clone() }), vec![0, 1]);
    }
}
