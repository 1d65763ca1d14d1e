//! Row reductions for the LM head: maximum, `sum(exp(l - max))`, argmax, picked logits and top-K.
//!
//! Numerics: llama.cpp's perplexity tool forms `l - max` and `expf` in f32 and sums in f64; here the
//! difference, the exponential and the sum are all f64 (a relative change of the sum below 1e-7, far
//! under llama.cpp's printed digits), so a row's log-sum-exp equals an f64 reference to ~1e-15 and
//! masked scoring agrees with `conditional_perplexity` on the same logits. `top_k` orders by logit descending, then id ascending;
//! `argmax` is the first index of the maximum. A NaN anywhere in a row makes `sum_exp` NaN, so
//! callers can refuse the row.
//!
//! `scalar` is the reference; the SIMD path (AVX2+FMA, picked at run time) must agree with it
//! exactly for max/argmax/top-K/picked and to rounding for `sum_exp`.

use crate::Dialect;

/// All reductions of one logits row.
#[derive(Debug, Clone, PartialEq)]
pub struct RowReduce {
    pub max: f32,
    /// `sum_i exp(l_i - max)`, all in f64.
    pub sum_exp: f64,
    /// First index of the maximum.
    pub argmax: u32,
    /// Logits of the requested ids, same order (NaN for an id outside the row).
    pub picked: Vec<f32>,
    /// The `top_k` best (id, logit), best first; ties: lower id first.
    pub top: Vec<(u32, f32)>,
}

/// Reduces one row: max/argmax, sum of exponentials, picked ids, top-K.
pub fn reduce_row(d: Dialect, row: &[f32], ids: &[u32], top_k: usize) -> RowReduce {
    let (max, argmax) = max_argmax(d, row);
    let sum_exp = sum_exp(d, row, max);
    let picked = ids.iter().map(|&i| row.get(i as usize).copied().unwrap_or(f32::NAN)).collect();
    let top = self::top_k(d, row, top_k);
    RowReduce { max, sum_exp, argmax, picked, top }
}

/// The reductions of one row whose logits arrive slice by slice (vocabulary slices of the LM
/// head, in ascending order), so the whole row never has to be held. Max, argmax, picked and
/// top-K equal [`reduce_row`]'s on the whole row; the sum of exponentials is each slice's own
/// f64 sum rescaled to the row maximum and added in slice order (another f64 summation order: a
/// relative change of order 1e-14). A slice's own part ([`SlicePart`]) can be computed on any
/// thread; merged in slice order, the result does not depend on where each part ran.
pub struct SlicedRow {
    ids: Vec<u32>,
    top_k: usize,
    max: f32,
    argmax: u32,
    /// (slice maximum, `sum(exp(l - slice maximum))`) per slice, in order (inline up to a
    /// 262144-entry vocabulary's 8 slices).
    parts: smallvec::SmallVec<[(f32, f64); 8]>,
    picked: Vec<f32>,
    top: Vec<(u32, f32)>,
}

/// One vocabulary slice's reductions, for [`SlicedRow::merge`].
pub struct SlicePart {
    offset: usize,
    len: usize,
    max: f32,
    /// First index of the maximum within the slice.
    at: u32,
    sum: f64,
    /// The slice's logits of the row's ids (NaN for ids outside it).
    picked: Vec<f32>,
    /// The slice's top-K, ids within the slice.
    top: TopEntries,
}

impl SlicePart {
    /// The reductions of entries `offset..offset + slice.len()` of a row.
    pub fn new(d: Dialect, ids: &[u32], top_k: usize, offset: usize, slice: &[f32]) -> SlicePart {
        let (max, at) = max_argmax(d, slice);
        let sum = if max == f32::NEG_INFINITY { if slice.iter().any(|x| x.is_nan()) { f64::NAN } else { 0.0 } } else { sum_exp(d, slice, max) };
        let picked = ids.iter().map(|&id| (id as usize).checked_sub(offset).and_then(|i| slice.get(i)).copied().unwrap_or(f32::NAN)).collect();
        SlicePart { offset, len: slice.len(), max, at, sum, picked, top: top_entries(d, slice, top_k) }
    }
}

impl SlicedRow {
    pub fn new(ids: &[u32], top_k: usize) -> SlicedRow {
        let top = Vec::with_capacity(2 * top_k);
        SlicedRow { ids: ids.to_vec(), top_k, max: f32::NEG_INFINITY, argmax: 0, parts: smallvec::SmallVec::new(), picked: vec![f32::NAN; ids.len()], top }
    }

    /// The logits of entries `offset..offset + slice.len()`; slices must come in ascending order.
    pub fn add(&mut self, d: Dialect, offset: usize, slice: &[f32]) {
        let part = SlicePart::new(d, &self.ids, self.top_k, offset, slice);
        self.merge(&part);
    }

    /// A slice's part (made with this row's ids and top-K); parts must come in ascending order.
    pub fn merge(&mut self, part: &SlicePart) {
        let &SlicePart { offset, len, max: m, at, sum, ref picked, ref top } = part;
        if m > self.max || self.parts.is_empty() {
            // strictly greater: an earlier slice keeps the first index of a tied maximum
            if m > self.max {
                self.max = m;
            }
            self.argmax = offset as u32 + at;
        }
        self.parts.push((m, sum));
        for (p, (&id, &v)) in self.picked.iter_mut().zip(self.ids.iter().zip(picked)) {
            if (offset..offset + len).contains(&(id as usize)) {
                *p = v;
            }
        }
        // new ids are all higher: the two lists, each best first, merge from their ends (in the
        // room the list keeps for both), a kept entry ahead of a new one of the same logit (the
        // lower id first)
        let (mut i, mut j) = (self.top.len(), top.len());
        self.top.resize(i + j, (0, 0.0));
        while j > 0 {
            let w = i + j - 1;
            if i > 0 && self.top[i - 1].1 < top[j - 1].1 {
                self.top[w] = self.top[i - 1];
                i -= 1;
            } else {
                self.top[w] = (offset as u32 + top[j - 1].0, top[j - 1].1);
                j -= 1;
            }
        }
        self.top.truncate(self.top_k);
    }

    pub fn finish(self) -> RowReduce {
        let sum_exp = if self.max == f32::NEG_INFINITY {
            f64::NAN
        } else {
            self.parts.iter().map(|&(m, s)| if s == 0.0 { 0.0 } else { s * (m as f64 - self.max as f64).exp() }).sum()
        };
        RowReduce { max: self.max, sum_exp, argmax: self.argmax, picked: self.picked, top: self.top }
    }
}

/// Row maximum and the first index holding it (`(-inf, 0)` for an empty row).
pub fn max_argmax(d: Dialect, row: &[f32]) -> (f32, u32) {
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && avx2::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { avx2::max_argmax(row) };
    }
    let _ = d;
    scalar::max_argmax(row)
}

/// `sum(exp(l - max))`, difference, exponential and sum in f64.
pub fn sum_exp(d: Dialect, row: &[f32], max: f32) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && crate::simd::level() == crate::simd::Level::Avx512 {
        // SAFETY: the level is only Avx512 when the CPU has AVX-512F (and AVX2, FMA).
        return unsafe { avx512::sum_exp(row, max) };
    }
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && avx2::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { avx2::sum_exp(row, max) };
    }
    let _ = d;
    scalar::sum_exp(row, max)
}

/// The `k` largest logits as (id, logit), best first; ties broken by lower id.
pub fn top_k(d: Dialect, row: &[f32], k: usize) -> Vec<(u32, f32)> {
    top_entries(d, row, k).into_vec()
}

/// A short top-K list: inline (no heap allocation) up to 16 entries.
pub type TopEntries = smallvec::SmallVec<[(u32, f32); 16]>;

/// [`top_k`] as a [`TopEntries`].
fn top_entries(d: Dialect, row: &[f32], k: usize) -> TopEntries {
    if k == 0 {
        return TopEntries::new();
    }
    if k >= row.len() / 8 {
        return sorted_top(row, k);
    }
    #[cfg(target_arch = "x86_64")]
    if d == Dialect::Simd && avx2::available() {
        // SAFETY: the CPU supports AVX2 and FMA (checked just above).
        return unsafe { avx2::top_k(row, k) };
    }
    let _ = d;
    scalar::top_k(row, k)
}

/// [`top_entries`] for a `k` that is a large part of the row (llama-server's `n_probs` may ask for
/// the whole vocabulary): a stable sort of the row, O(n log n) where the bounded list's inserts are
/// O(n·k), the same entries in the same order (ties by id; NaN and −∞, a banned or masked token,
/// never enter: the bounded list takes only logits above its threshold, −∞ until it is full).
fn sorted_top(row: &[f32], k: usize) -> TopEntries {
    let mut all: TopEntries = row.iter().enumerate().filter(|(_, &v)| v > f32::NEG_INFINITY).map(|(i, &v)| (i as u32, v)).collect();
    all.sort_by(|a, b| b.1.partial_cmp(&a.1).expect("no NaN left"));
    all.truncate(k);
    all
}

/// Final-logit soft-capping in place: `cap * tanh(x / cap)` (ggml order: scale by 1/cap, tanh, scale by cap).
pub fn softcap(_d: Dialect, row: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for x in row.iter_mut() {
        *x = (*x * inv).tanh() * cap;
    }
}

/// A bounded list of the best (id, logit) pairs seen so far, kept sorted best first.
pub(crate) struct TopList {
    k: usize,
    items: TopEntries,
}

impl TopList {
    pub(crate) fn new(k: usize) -> TopList {
        TopList { k, items: TopEntries::with_capacity(k) }
    }

    /// Logit a candidate must exceed to enter (ids arrive ascending, so equal logits lose).
    #[inline(always)]
    pub(crate) fn threshold(&self) -> f32 {
        if self.items.len() < self.k {
            f32::NEG_INFINITY
        } else {
            self.items[self.k - 1].1
        }
    }

    /// Offers `(id, v)`; ids must be offered in ascending order.
    #[inline]
    pub(crate) fn offer(&mut self, id: u32, v: f32) {
        // NaN never enters; when full, only a strictly larger logit does
        if v.is_nan() || (self.items.len() == self.k && v <= self.threshold()) {
            return;
        }
        // the last entry (the threshold v beats) leaves first; v goes after every entry with
        // logit >= v (those have lower ids on ties)
        if self.items.len() == self.k {
            self.items.pop();
        }
        let pos = self.items.partition_point(|&(_, x)| x >= v);
        self.items.insert(pos, (id, v));
    }

    pub(crate) fn into_entries(self) -> TopEntries {
        self.items
    }
}

/// Portable reference implementations.
pub mod scalar {
    use super::TopList;

    pub fn max_argmax(row: &[f32]) -> (f32, u32) {
        let mut best = f32::NEG_INFINITY;
        let mut at = 0u32;
        for (i, &x) in row.iter().enumerate() {
            if x > best {
                best = x;
                at = i as u32;
            }
        }
        (best, at)
    }

    pub fn sum_exp(row: &[f32], max: f32) -> f64 {
        let mut s = 0.0f64;
        for &x in row {
            s += (x as f64 - max as f64).exp();
        }
        s
    }

    pub fn top_k(row: &[f32], k: usize) -> super::TopEntries {
        let mut t = TopList::new(k);
        for (i, &x) in row.iter().enumerate() {
            if x > t.threshold() {
                t.offer(i as u32, x);
            }
        }
        t.into_entries()
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2 {
    use super::TopList;
    use std::arch::x86_64::*;

    pub fn available() -> bool {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn max_argmax(row: &[f32]) -> (f32, u32) {
        let n = row.len();
        let p = row.as_ptr();
        let mut vm = _mm256_set1_ps(f32::NEG_INFINITY);
        let mut i = 0;
        while i + 8 <= n {
            vm = _mm256_max_ps(vm, _mm256_loadu_ps(p.add(i)));
            i += 8;
        }
        let mut lanes = [0f32; 8];
        _mm256_storeu_ps(lanes.as_mut_ptr(), vm);
        let mut best = f32::NEG_INFINITY;
        for &x in lanes.iter().chain(row[i..].iter()) {
            if x > best {
                best = x;
            }
        }
        if best == f32::NEG_INFINITY {
            return super::scalar::max_argmax(row);
        }
        // first index holding the maximum
        let vb = _mm256_set1_ps(best);
        let mut j = 0;
        while j + 8 <= n {
            let m = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(_mm256_loadu_ps(p.add(j)), vb));
            if m != 0 {
                return (best, (j + m.trailing_zeros() as usize) as u32);
            }
            j += 8;
        }
        for (k, &x) in row[j..].iter().enumerate() {
            if x == best {
                return (best, (j + k) as u32);
            }
        }
        (best, 0)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn sum_exp(row: &[f32], max: f32) -> f64 {
        let n = row.len();
        let p = row.as_ptr();
        let vmax = _mm256_set1_ps(max);
        let vmax_d = _mm256_set1_pd(max as f64);
        let mut a0 = _mm256_setzero_pd();
        let mut a1 = _mm256_setzero_pd();
        let mut nan = _mm256_setzero_ps();
        let mut i = 0;
        while i + 8 <= n {
            let l = _mm256_loadu_ps(p.add(i));
            let x = _mm256_sub_ps(l, vmax);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
            let lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(l)), vmax_d);
            let hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps::<1>(l)), vmax_d);
            a0 = _mm256_add_pd(a0, super::exp_nonpositive(lo));
            a1 = _mm256_add_pd(a1, super::exp_nonpositive(hi));
            i += 8;
        }
        super::finish_sum_exp(_mm256_add_pd(a0, a1), &row[i..], max, _mm256_movemask_ps(nan) != 0)
    }

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn top_k(row: &[f32], k: usize) -> super::TopEntries {
        let n = row.len();
        let p = row.as_ptr();
        let mut t = TopList::new(k);
        let mut i = 0;
        while i + 8 <= n {
            let th = _mm256_set1_ps(t.threshold());
            let mut m = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(_mm256_loadu_ps(p.add(i)), th));
            while m != 0 {
                let l = m.trailing_zeros() as usize;
                let x = row[i + l];
                if x > t.threshold() {
                    t.offer((i + l) as u32, x);
                }
                m &= m - 1;
            }
            i += 8;
        }
        for (j, &x) in row[i..].iter().enumerate() {
            if x > t.threshold() {
                t.offer((i + j) as u32, x);
            }
        }
        t.into_entries()
    }
}

/// exp for f64 lanes of x <= 0: n = round(x log2 e), r = x - n ln2 (two-part constant),
/// e^r by its Taylor series to r^12 (|r| <= ln2/2, truncation < 2e-16), times 2^n built in the
/// exponent bits; below -708 (2^n subnormal) the result is 0, as is exp(-inf).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn exp_nonpositive<V: F64Lanes>(x: V) -> V {
    let lo = V::splat(-708.0);
    let xc = V::max(x, lo);
    let n = V::round(V::mul(xc, V::splat(std::f64::consts::LOG2_E)));
    let r = V::fnmadd(n, V::splat(6.931_471_803_691_238e-1), xc);
    let r = V::fnmadd(n, V::splat(1.908_214_929_270_587_7e-10), r);
    let mut p = V::splat(1.0 / 479_001_600.0);
    let mut fact = 479_001_600.0f64;
    for k in (1..12).rev() {
        fact /= (k + 1) as f64;
        p = V::fmadd(p, r, V::splat(1.0 / fact));
    }
    p = V::fmadd(p, r, V::splat(1.0));
    V::keep_above(V::mul(p, V::pow2(n)), x, lo)
}

/// The f64 lane operations [`exp_nonpositive`] uses, on 4 (AVX2) or 8 (AVX-512) lanes; each is
/// per lane, so both widths give every lane the same value. Callers enable the ISA's features.
#[cfg(target_arch = "x86_64")]
trait F64Lanes: Copy {
    unsafe fn splat(x: f64) -> Self;
    unsafe fn max(a: Self, b: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    /// To the nearest integer, ties to even.
    unsafe fn round(a: Self) -> Self;
    /// `a·b + c`, fused.
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self;
    /// `c − a·b`, fused.
    unsafe fn fnmadd(a: Self, b: Self, c: Self) -> Self;
    /// 2^n for integral `n` in the normal exponent range, built in the exponent bits.
    unsafe fn pow2(n: Self) -> Self;
    /// `y` where `x > lo`, else 0.
    unsafe fn keep_above(y: Self, x: Self, lo: Self) -> Self;
}

/// The lane operations that are one intrinsic each, by the intrinsics' names (`$round` takes the
/// rounding mode as its constant).
#[cfg(target_arch = "x86_64")]
macro_rules! f64_lanes_simple {
    ($set1:ident, $max:ident, $mul:ident, $round:ident, $fmadd:ident, $fnmadd:ident) => {
        #[inline(always)]
        unsafe fn splat(x: f64) -> Self {
            std::arch::x86_64::$set1(x)
        }
        #[inline(always)]
        unsafe fn max(a: Self, b: Self) -> Self {
            std::arch::x86_64::$max(a, b)
        }
        #[inline(always)]
        unsafe fn mul(a: Self, b: Self) -> Self {
            std::arch::x86_64::$mul(a, b)
        }
        #[inline(always)]
        unsafe fn round(a: Self) -> Self {
            use std::arch::x86_64::{_MM_FROUND_NO_EXC, _MM_FROUND_TO_NEAREST_INT};
            std::arch::x86_64::$round::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(a)
        }
        #[inline(always)]
        unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
            std::arch::x86_64::$fmadd(a, b, c)
        }
        #[inline(always)]
        unsafe fn fnmadd(a: Self, b: Self, c: Self) -> Self {
            std::arch::x86_64::$fnmadd(a, b, c)
        }
    };
}

#[cfg(target_arch = "x86_64")]
impl F64Lanes for std::arch::x86_64::__m256d {
    f64_lanes_simple!(_mm256_set1_pd, _mm256_max_pd, _mm256_mul_pd, _mm256_round_pd, _mm256_fmadd_pd, _mm256_fnmadd_pd);
    #[inline(always)]
    unsafe fn pow2(n: Self) -> Self {
        use std::arch::x86_64::*;
        let ni = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n));
        _mm256_castsi256_pd(_mm256_slli_epi64::<52>(_mm256_add_epi64(ni, _mm256_set1_epi64x(1023))))
    }
    #[inline(always)]
    unsafe fn keep_above(y: Self, x: Self, lo: Self) -> Self {
        use std::arch::x86_64::*;
        _mm256_and_pd(y, _mm256_cmp_pd::<_CMP_GT_OQ>(x, lo))
    }
}

#[cfg(target_arch = "x86_64")]
impl F64Lanes for std::arch::x86_64::__m512d {
    f64_lanes_simple!(_mm512_set1_pd, _mm512_max_pd, _mm512_mul_pd, _mm512_roundscale_pd, _mm512_fmadd_pd, _mm512_fnmadd_pd);
    #[inline(always)]
    unsafe fn pow2(n: Self) -> Self {
        use std::arch::x86_64::*;
        let ni = _mm512_cvtepi32_epi64(_mm512_cvtpd_epi32(n));
        _mm512_castsi512_pd(_mm512_slli_epi64::<52>(_mm512_add_epi64(ni, _mm512_set1_epi64(1023))))
    }
    #[inline(always)]
    unsafe fn keep_above(y: Self, x: Self, lo: Self) -> Self {
        use std::arch::x86_64::*;
        _mm512_maskz_mov_pd(_mm512_cmp_pd_mask::<_CMP_GT_OQ>(x, lo), y)
    }
}

/// The end of a vector sum of exponentials: the four lane sums `(l0 + l1) + (l2 + l3)`, then the
/// `tail` left after whole vectors, one by one; NaN when a NaN logit was seen.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn finish_sum_exp(lanes: std::arch::x86_64::__m256d, tail: &[f32], max: f32, nan: bool) -> f64 {
    let mut l = [0f64; 4];
    std::arch::x86_64::_mm256_storeu_pd(l.as_mut_ptr(), lanes);
    let mut s = (l[0] + l[1]) + (l[2] + l[3]);
    for &x in tail {
        s += (x as f64 - max as f64).exp();
    }
    if nan {
        f64::NAN
    } else {
        s
    }
}

/// [`avx2::sum_exp`] on 8 f64 lanes: lanes 0–3 hold what its first accumulator holds, lanes
/// 4–7 its second, and both run [`exp_nonpositive`], so the sum is bit-identical (Gemma-3's
/// 262k-entry rows: the reduction was 7 % of an 8-session decode step).
#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) unsafe fn sum_exp(row: &[f32], max: f32) -> f64 {
        let n = row.len();
        let p = row.as_ptr();
        let vmax = _mm256_set1_ps(max);
        let vmax_d = _mm512_set1_pd(max as f64);
        let mut acc = _mm512_setzero_pd();
        let mut nan = _mm256_setzero_ps();
        let mut i = 0;
        while i + 8 <= n {
            let l = _mm256_loadu_ps(p.add(i));
            let x = _mm256_sub_ps(l, vmax);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x));
            acc = _mm512_add_pd(acc, super::exp_nonpositive(_mm512_sub_pd(_mm512_cvtps_pd(l), vmax_d)));
            i += 8;
        }
        let folded = _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd::<1>(acc));
        super::finish_sum_exp(folded, &row[i..], max, _mm256_movemask_ps(nan) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Uniform in [-1, 1), advancing `seed` (the crate's test xorshift).
    fn rng(seed: &mut u64) -> f32 {
        let mut r = crate::test_rng::Rng(*seed);
        let v = r.signed();
        *seed = r.0;
        v
    }

    #[test]
    fn simd_matches_scalar_on_random_rows() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        for (n, scale) in [(1usize, 1.0f32), (7, 3.0), (33, 10.0), (1000, 20.0), (32003, 30.0), (49152, 8.0)] {
            let mut row: Vec<f32> = (0..n).map(|_| rng(&mut s) * scale).collect();
            // ties, repeated maxima and -inf entries
            if n > 40 {
                row[5] = 1e3;
                row[37] = 1e3;
                row[11] = row[12];
                row[20] = f32::NEG_INFINITY;
            }
            let ids: Vec<u32> = (0..n.min(5) as u32).collect();
            let a = reduce_row(Dialect::Scalar, &row, &ids, 32);
            let b = reduce_row(Dialect::Simd, &row, &ids, 32);
            assert_eq!(a.max, b.max, "max n={n}");
            assert_eq!(a.argmax, b.argmax, "argmax n={n}");
            assert_eq!(a.top, b.top, "top-k n={n}");
            assert_eq!(a.picked, b.picked);
            let rel = ((a.sum_exp - b.sum_exp) / a.sum_exp).abs();
            assert!(rel < 1e-13, "sum_exp n={n}: scalar {} simd {} rel {rel:e}", a.sum_exp, b.sum_exp);
        }
    }

    /// The AVX-512 sum of exponentials against the AVX2 one, bit for bit (tails, −∞, entries far
    /// below the maximum, a NaN).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn sum_exp_avx512_equals_avx2() {
        if !(is_x86_feature_detected!("avx512f") && avx2::available()) {
            return;
        }
        let mut s = 0x51f1_5eedu64;
        for (n, scale) in [(5usize, 1.0f32), (8, 4.0), (37, 30.0), (4099, 900.0), (262144, 12.0)] {
            let mut row: Vec<f32> = (0..n).map(|_| rng(&mut s) * scale).collect();
            row[n / 2] = f32::NEG_INFINITY;
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            // SAFETY: the CPU has the features (checked above).
            let (a, b) = unsafe { (avx2::sum_exp(&row, max), avx512::sum_exp(&row, max)) };
            assert!(a.is_finite() && a >= 1.0);
            assert_eq!(a.to_bits(), b.to_bits(), "n={n}");
            row[n - 1] = f32::NAN;
            // SAFETY: as above.
            assert!(unsafe { avx512::sum_exp(&row, max) }.is_nan(), "n={n}");
        }
    }

    #[test]
    fn sliced_row_equals_whole_row() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        for (n, cut) in [(1000usize, 16usize), (49152, 16384), (5000, 4096), (33, 32)] {
            let mut row: Vec<f32> = (0..n).map(|_| rng(&mut s) * 12.0).collect();
            // a tie for the maximum across two slices, and a tie inside the top-K across a cut
            row[3] = 50.0;
            row[n - 1] = 50.0;
            row[cut - 1] = 40.0;
            row[cut.min(n - 2)] = 40.0;
            let ids = [0u32, cut as u32, (n - 1) as u32, n as u32 + 5];
            for d in [Dialect::Scalar, Dialect::Simd] {
                let whole = reduce_row(d, &row, &ids, 32);
                let mut acc = SlicedRow::new(&ids, 32);
                for (j, sl) in row.chunks(cut).enumerate() {
                    acc.add(d, j * cut, sl);
                }
                let got = acc.finish();
                assert_eq!((got.max, got.argmax), (whole.max, whole.argmax), "n={n}");
                assert_eq!(got.top, whole.top, "n={n}");
                assert_eq!(got.picked[..3], whole.picked[..3]);
                assert!(got.picked[3].is_nan());
                assert!(((got.sum_exp - whole.sum_exp) / whole.sum_exp).abs() < 1e-12, "n={n}: {} vs {}", got.sum_exp, whole.sum_exp);
            }
        }
    }

    #[test]
    fn sliced_row_keeps_nan_and_all_minus_infinity() {
        let mut acc = SlicedRow::new(&[], 4);
        acc.add(Dialect::Simd, 0, &[1.0, 2.0]);
        acc.add(Dialect::Simd, 2, &[f32::NEG_INFINITY, f32::NAN]);
        assert!(acc.finish().sum_exp.is_nan());
        let mut acc = SlicedRow::new(&[], 4);
        acc.add(Dialect::Simd, 0, &[f32::NEG_INFINITY; 3]);
        assert!(acc.finish().sum_exp.is_nan());
    }

    #[test]
    fn a_large_top_k_sorts_as_the_bounded_list_keeps() {
        // ties across the cut, NaN and −∞ (in the last row most entries: fewer finite ones than
        // k); k from a few (the bounded list) to past the row (a sort)
        let mut rng = crate::test_rng::Rng::new(11);
        for (n, banned) in [(7usize, 3), (64, 5), (1000, 7), (1000, 1)] {
            let row: Vec<f32> = (0..n)
                .map(|i| match i % 13 {
                    5 => f32::NAN,
                    _ if i % banned == 0 => f32::NEG_INFINITY,
                    _ => (rng.next() % 9) as f32 - 4.0,
                })
                .collect();
            for k in [1, 3, n / 8, n / 2, n, n + 5] {
                let want = scalar::top_k(&row, k.max(1)).into_vec();
                assert_eq!(sorted_top(&row, k.max(1)).into_vec(), want, "n={n} k={k}");
                for d in [Dialect::Scalar, Dialect::Simd] {
                    assert_eq!(top_k(d, &row, k.max(1)), want, "n={n} k={k}");
                    // the same in slices of 100, merged
                    let mut acc = SlicedRow::new(&[], k.max(1));
                    for (c, part) in row.chunks(100).enumerate() {
                        acc.add(d, 100 * c, part);
                    }
                    assert_eq!(acc.finish().top, want, "sliced n={n} k={k}");
                }
            }
        }
    }

    #[test]
    fn top_k_orders_ties_by_id_and_argmax_is_first() {
        let row = [1.0f32, 3.0, 2.0, 3.0, -1.0, 3.0];
        for d in [Dialect::Scalar, Dialect::Simd] {
            let r = reduce_row(d, &row, &[4, 9], 4);
            assert_eq!(r.argmax, 1);
            assert_eq!(r.top, vec![(1, 3.0), (3, 3.0), (5, 3.0), (2, 2.0)]);
            assert_eq!(r.picked[0], -1.0);
            assert!(r.picked[1].is_nan());
        }
    }

    #[test]
    fn nan_row_gives_nan_sum() {
        let mut row = vec![0.5f32; 100];
        row[50] = f32::NAN;
        for d in [Dialect::Scalar, Dialect::Simd] {
            let (m, _) = max_argmax(d, &row);
            assert!(sum_exp(d, &row, m).is_nan());
        }
    }

    #[test]
    fn simd_exp_is_close_to_libm() {
        let xs: Vec<f32> = (0..20000).map(|i| -100.0 + i as f32 * 0.005).collect();
        for chunk in xs.chunks(8) {
            let s = scalar::sum_exp(chunk, 0.0);
            let v = sum_exp(Dialect::Simd, chunk, 0.0);
            assert!(((s - v) / s.max(1e-300)).abs() < 1e-14 || (s - v).abs() < 1e-300, "{chunk:?}: {s} vs {v}");
        }
    }
}
