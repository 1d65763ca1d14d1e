//! Flash attention tiled over queries and keys (AVX-512F, or AVX2 on two registers per 16 lanes,
//! bit-identical): a micro-tile of [`RM`] query rows
//! (query position × head of one KV group) against panels of 16 keys. K is stored transposed per
//! panel (`kt[panel][d][16]`), so the 16 scores of a row are one vector of FMAs with the query
//! element broadcast; `P·V` adds each key's V row scaled by the broadcast probability into the
//! rows' accumulators. Online softmax per row as in `flash.rs`: running max `m`, sum `l` (f64),
//! accumulator rescaled by `exp(m_old − m_new)` when the max grows, masked keys contribute 0.
//! The keys go in chunks of [`CHUNK_PANELS`] panels at fixed absolute positions: each chunk's
//! softmax starts afresh and the chunks' states are folded in order ([`fold`]), so a decode
//! step can hand a row's chunks to different threads and fold them after (the same bits).

#![allow(clippy::needless_range_loop)] // register tiles index several parallel arrays

use core::arch::x86_64::*;

/// Query rows per micro-tile.
pub(crate) const RM: usize = 4;
/// Keys per panel (one 512-bit vector of f32 scores).
pub(crate) const KP: usize = 16;

/// Panels of one chunk of keys (512 keys), counted from key 0. A 512-key window (every
/// c512 scoring) is one chunk; 256-key chunks moved the 4-chunk perplexities by 0.04–0.12 %
/// (rounding, carried on through the quantized activations).
pub(crate) const CHUNK_PANELS: usize = 32;

/// How the kernel reads 16 consecutive K-panel or V values: f32 as stored, or f16 bits widened
/// as they load (exact: the same f32 values a conversion beforehand would give).
pub(crate) trait Lanes: Copy + Sync {
    /// # Safety
    /// `p` must point at 16 readable values; the CPU must have `V`'s instructions.
    unsafe fn load16<V: V16>(p: *const Self) -> V;
}

impl Lanes for f32 {
    #[inline(always)]
    unsafe fn load16<V: V16>(p: *const f32) -> V {
        V::load(p)
    }
}

impl Lanes for u16 {
    #[inline(always)]
    unsafe fn load16<V: V16>(p: *const u16) -> V {
        V::load_f16(p)
    }
}

/// 16 f32 lanes: one AVX-512 register or two AVX2 ones. Every operation is per lane (the same
/// rounding either way), and the two reductions run in one fixed order, so both ISAs give
/// bit-identical results.
pub(crate) trait V16: Copy {
    /// Output columns one pass of `P·V` keeps in registers (`RM` rows of them).
    const COLS: usize;
    unsafe fn zero() -> Self;
    unsafe fn splat(x: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn load_f16(p: *const u16) -> Self;
    unsafe fn store(self, p: *mut f32);
    /// `a·b + c`, fused.
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self;
    unsafe fn mul(a: Self, b: Self) -> Self;
    unsafe fn sub(a: Self, b: Self) -> Self;
    unsafe fn exp(self) -> Self;
    /// Lanes `a..=b` kept, the others −∞.
    unsafe fn keep(self, a: usize, b: usize) -> Self;
    unsafe fn max(self) -> f32;
    /// Σ of the lanes in f64: lane i + lane i+8, then i + i+4, then i + i+2, then the two.
    unsafe fn sum_f64(self) -> f64;
}

#[derive(Clone, Copy)]
pub(crate) struct Zmm(__m512);

impl V16 for Zmm {
    const COLS: usize = 64;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Zmm(_mm512_setzero_ps())
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        Zmm(_mm512_set1_ps(x))
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Zmm(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> Self {
        Zmm(_mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i)))
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self.0)
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        Zmm(_mm512_fmadd_ps(a.0, b.0, c.0))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        Zmm(_mm512_mul_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        Zmm(_mm512_sub_ps(a.0, b.0))
    }
    #[inline(always)]
    unsafe fn exp(self) -> Self {
        Zmm(crate::vexp::exp16(self.0))
    }
    #[inline(always)]
    unsafe fn keep(self, a: usize, b: usize) -> Self {
        let m = ((1u32 << (b + 1)) - 1) & !((1u32 << a) - 1);
        Zmm(_mm512_mask_mov_ps(_mm512_set1_ps(f32::NEG_INFINITY), m as __mmask16, self.0))
    }
    #[inline(always)]
    unsafe fn max(self) -> f32 {
        _mm512_reduce_max_ps(self.0)
    }
    #[inline(always)]
    unsafe fn sum_f64(self) -> f64 {
        let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(self.0));
        let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(self.0))));
        let d = _mm512_add_pd(lo, hi);
        let t = _mm256_add_pd(_mm512_castpd512_pd256(d), _mm512_extractf64x4_pd::<1>(d));
        sum4(t)
    }
}

#[derive(Clone, Copy)]
pub(crate) struct Ymm2(__m256, __m256);

impl V16 for Ymm2 {
    const COLS: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        Ymm2(_mm256_setzero_ps(), _mm256_setzero_ps())
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        let v = _mm256_set1_ps(x);
        Ymm2(v, v)
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Ymm2(_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> Self {
        Ymm2(
            _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i)),
            _mm256_cvtph_ps(_mm_loadu_si128(p.add(8) as *const __m128i)),
        )
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self.0);
        _mm256_storeu_ps(p.add(8), self.1);
    }
    #[inline(always)]
    unsafe fn fmadd(a: Self, b: Self, c: Self) -> Self {
        Ymm2(_mm256_fmadd_ps(a.0, b.0, c.0), _mm256_fmadd_ps(a.1, b.1, c.1))
    }
    #[inline(always)]
    unsafe fn mul(a: Self, b: Self) -> Self {
        Ymm2(_mm256_mul_ps(a.0, b.0), _mm256_mul_ps(a.1, b.1))
    }
    #[inline(always)]
    unsafe fn sub(a: Self, b: Self) -> Self {
        Ymm2(_mm256_sub_ps(a.0, b.0), _mm256_sub_ps(a.1, b.1))
    }
    #[inline(always)]
    unsafe fn exp(self) -> Self {
        Ymm2(crate::vexp::exp8(self.0), crate::vexp::exp8(self.1))
    }
    #[inline(always)]
    unsafe fn keep(self, a: usize, b: usize) -> Self {
        let (lo, hi) = (_mm256_set1_epi32(a as i32 - 1), _mm256_set1_epi32(b as i32 + 1));
        let inf = _mm256_set1_ps(f32::NEG_INFINITY);
        let pick = |idx: __m256i, v: __m256| {
            let m = _mm256_and_si256(_mm256_cmpgt_epi32(idx, lo), _mm256_cmpgt_epi32(hi, idx));
            _mm256_blendv_ps(inf, v, _mm256_castsi256_ps(m))
        };
        Ymm2(
            pick(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), self.0),
            pick(_mm256_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15), self.1),
        )
    }
    #[inline(always)]
    unsafe fn max(self) -> f32 {
        let m = _mm256_max_ps(self.0, self.1);
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<1>(m, m)))
    }
    #[inline(always)]
    unsafe fn sum_f64(self) -> f64 {
        let cvt = |v: __m256| (_mm256_cvtps_pd(_mm256_castps256_ps128(v)), _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(v)));
        let ((a0, a1), (b0, b1)) = (cvt(self.0), cvt(self.1));
        // lanes 0..3 and 4..7 each plus their partner 8 lanes on
        let (d0, d1) = (_mm256_add_pd(a0, b0), _mm256_add_pd(a1, b1));
        sum4(_mm256_add_pd(d0, d1))
    }
}

/// `(t0 + t2) + (t1 + t3)`.
#[inline(always)]
unsafe fn sum4(t: __m256d) -> f64 {
    let u = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd::<1>(t));
    _mm_cvtsd_f64(_mm_add_sd(u, _mm_unpackhi_pd(u, u)))
}

/// One micro-tile's rows.
pub(crate) struct Rows<'a> {
    /// Query rows (dk floats each).
    pub q: [&'a [f32]; RM],
    /// Last visible key of each row (absolute position) and the first (window), as indices
    /// into the panel arrays (i.e. minus the call's first key `lo`).
    pub last: [usize; RM],
    pub first: [usize; RM],
    pub n: usize,
    /// The absolute panel of panel 0 (the call's first key over 16).
    pub lo_panel: usize,
    /// Only this chunk (absolute index): each row's output is then its unnormalised
    /// accumulator, and its state is left in `states` for [`fold`].
    pub chunk: Option<usize>,
}

/// The micro-tile's entry points, one per ISA: the same [`tile`] compiled with that ISA's features.
macro_rules! entry {
    ($(#[$doc:meta])* $name:ident, $features:literal, $v:ty $(, $pipe:literal)?) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`tile`]; the CPU must have the features named in the attribute.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name<E: Lanes>(rows: &Rows, head: &Head<E>, acc: &mut [f32], out: &mut [&mut [f32]; RM], states: &mut [Softmax; RM]) {
            tile::<$v, E, { true $(&& $pipe)? }>(rows, head, acc, out, states)
        }
    };
}

entry!(
    /// Runs the micro-tile with AVX-512 (see [`tile`]).
    micro_tile_avx512, "avx512f,avx2,fma", Zmm
);
entry!(
    /// Runs the micro-tile with AVX2 (see [`tile`]); bit-identical to [`micro_tile_avx512`].
    micro_tile_avx2, "avx2,fma,f16c", Ymm2
);
#[cfg(test)]
entry!(
    /// [`micro_tile_avx2`] with the panels never pipelined: the check that pipelining moves no bit.
    micro_tile_avx2_plain, "avx2,fma,f16c", Ymm2, false
);

/// One KV head's keys as the micro-tile reads them: `kt` its transposed K panels (`dk·16`
/// values each), `v` its V rows (`dv` values each, rows up to a whole number of panels), and the
/// scores' scale.
#[derive(Clone, Copy)]
pub(crate) struct Head<'a, E> {
    pub kt: &'a [E],
    pub v: &'a [E],
    pub dk: usize,
    pub dv: usize,
    pub scale: f32,
    /// Ask for later panels' K and V while this one is computed ([`Ahead`]): set where the panels
    /// are read once (a decode step's one query per session), so they come from memory. A
    /// prefill's tiles reread panels from cache and would only pay the requests (its attention
    /// was 6 % slower with them).
    pub ahead: bool,
}

/// Key steps of a `P·V` between two of [`Ahead`]'s asks (a divisor of [`KP`]).
const ASK_EVERY: usize = 4;

/// The cache lines a decode tile asks for into L1 while it computes one panel's `P·V`: a later
/// panel's K and V, `per` lines of each at every [`ASK_EVERY`]th key step. Asked for all at once
/// at the panel's start, the 64 requests of a SmolLM2 panel waited for free fill buffers, and
/// the tile with them; asked at every step, the asking cost the AVX2 tile (16-column steps) more
/// than it saved. Against the requests at the panel's start, decode steps alternated in one
/// process (Emerald Rapids, 2 threads), 1 / 8 sessions: SmolLM2 −6 / −9 % (AVX2 −10 / −11 %),
/// Gemma-3 −1 / −8 % (−2 / −5 %), Qwen2.5-Coder −0.3 / −2 % (−1 / −2 %).
#[derive(Clone, Copy)]
struct Ahead {
    k: *const i8,
    k_lines: usize,
    v: *const i8,
    v_lines: usize,
    per: usize,
}

impl Ahead {
    /// K of panel `pk` and V of panel `pv` (none past the last panel, `p1 - 1`), asked for over
    /// the key steps of a `P·V` with `V` lanes (its first `dv / V::COLS` column blocks, rounded
    /// up: every block but a last short one is `V::COLS` wide).
    fn new<V: V16, E>(head: &Head<E>, pk: usize, pv: usize, p1: usize) -> Ahead {
        let (kn, vn, size) = (head.dk * KP, KP * head.dv, core::mem::size_of::<E>());
        let blocks = head.dv.div_ceil(V::COLS);
        let lines = |p: usize, n: usize| if p < p1 { n * size / 64 } else { 0 };
        let (k_lines, v_lines) = (lines(pk, kn), lines(pv, vn));
        Ahead {
            k: head.kt.as_ptr().wrapping_add(pk * kn) as *const i8,
            k_lines,
            v: head.v.as_ptr().wrapping_add(pv * vn) as *const i8,
            v_lines,
            per: k_lines.max(v_lines).div_ceil(blocks * KP / ASK_EVERY),
        }
    }

    /// Ask number `a`'s lines.
    #[inline(always)]
    unsafe fn ask(&self, a: usize) {
        for (base, n) in [(self.k, self.k_lines), (self.v, self.v_lines)] {
            for x in a * self.per..((a + 1) * self.per).min(n) {
                _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(64 * x));
            }
        }
    }
}

/// The micro-tile: the rows against `head`'s panels, writes row `r`'s output to `out[r]` (dv
/// floats; with `rows.chunk`, see there). `acc` is scratch of at least `2·RM·dv` floats.
///
/// # Safety
/// The CPU must have `V`'s instructions; `dk` and `dv` multiples of 16; the panels must cover
/// `max(last) + 1` keys.
#[inline(always)]
unsafe fn tile<V: V16, E: Lanes, const PIPE: bool>(rows: &Rows, head: &Head<E>, acc: &mut [f32], out: &mut [&mut [f32]; RM], states: &mut [Softmax; RM]) {
    match rows.n {
        1 => tile_n::<V, E, PIPE, 1>(rows, head, acc, out, states),
        2 => tile_n::<V, E, PIPE, 2>(rows, head, acc, out, states),
        3 => tile_n::<V, E, PIPE, 3>(rows, head, acc, out, states),
        _ => tile_n::<V, E, PIPE, RM>(rows, head, acc, out, states),
    }
}

/// A row's online-softmax state: running max and sum of exponentials (`l` 0: no key seen).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Softmax {
    pub m: f32,
    pub l: f64,
}

impl Softmax {
    pub(crate) const EMPTY: Softmax = Softmax { m: f32::NEG_INFINITY, l: 0.0 };
}

/// Folds a chunk's state `c` and accumulator `ca` into `o` / `oa`, the state of the chunks
/// before it (the first chunk with a key is taken as it is). Scalar, and the one place chunks
/// are combined, inside a tile or after a split decode step alike.
pub(crate) fn fold(o: &mut Softmax, oa: &mut [f32], c: Softmax, ca: &[f32]) {
    if c.l == 0.0 {
        return;
    }
    if o.l == 0.0 {
        *o = c;
        oa.copy_from_slice(ca);
        return;
    }
    let m = o.m.max(c.m);
    let (a, b) = ((o.m - m).exp(), (c.m - m).exp());
    for (x, &y) in oa.iter_mut().zip(ca) {
        *x = *x * a + y * b;
    }
    o.l = o.l * a as f64 + c.l * b as f64;
    o.m = m;
}

/// The output of a row from its folded state: the accumulator over the sum.
pub(crate) fn normalise(st: Softmax, acc: &[f32], out: &mut [f32]) {
    let inv = if st.l > 0.0 { (1.0 / st.l) as f32 } else { 0.0 };
    for (o, &a) in out.iter_mut().zip(acc) {
        *o = a * inv;
    }
}

/// [`tile`] for `N` rows (a constant, so the row loops unroll without tests).
#[inline(always)]
unsafe fn tile_n<V: V16, E: Lanes, const PIPE: bool, const N: usize>(rows: &Rows, head: &Head<E>, acc: &mut [f32], out: &mut [&mut [f32]; RM], states: &mut [Softmax; RM]) {
    let Head { kt, dk, dv, .. } = *head;
    let (acc, folded) = acc[..2 * N * dv].split_at_mut(N * dv);
    acc.fill(0.0);
    let mut st = [Softmax::EMPTY; N];
    let mut ost = [Softmax::EMPTY; N];
    let lmax = rows.last[..N].iter().copied().max().unwrap_or(0);
    let fmin = rows.first[..N].iter().copied().min().unwrap_or(0);
    let (mut p0, mut p1) = (fmin / KP, lmax / KP + 1);
    if let Some(c) = rows.chunk {
        p0 = p0.max((c * CHUNK_PANELS).saturating_sub(rows.lo_panel));
        p1 = p1.min(((c + 1) * CHUNK_PANELS).saturating_sub(rows.lo_panel));
    }
    // a chunk ends before panel p: fold it into the chunks before it and start the next afresh
    let mut chunks = 0;
    let mut next_chunk = |p: usize, st: &mut [Softmax; N], acc: &mut [f32]| {
        if p > p0 && (rows.lo_panel + p).is_multiple_of(CHUNK_PANELS) {
            fold_chunk(st, acc, &mut ost, folded, dv, chunks == 0);
            chunks += 1;
        }
    };
    if PIPE && dk == dv && dv % V::COLS == 0 && p0 < p1 {
        // Software-pipelined: the next panel's scores are computed inside this panel's `P·V`
        // loop, so the scores' FMA chains (one per row, `dk` long) overlap the `P·V` FMAs
        // instead of running alone. Each value is the same chain of operations as below. On
        // AVX2 (16 columns a block) decode attention ran 10–15 % faster with it (SmolLM2 and
        // Gemma-3 shapes, one session, steps alternated in one process). Panel p + 1's K is
        // read during panel p's `P·V`, so that `P·V` asks for the K of panel p + 2.
        let mut s = scores::<V, E, N>(rows, kt, dk, p0);
        for p in p0..p1 {
            next_chunk(p, &mut st, acc);
            let ahead = head.ahead.then(|| Ahead::new::<V, E>(head, p + 2, p + 1, p1));
            let pbuf = softmax::<V, N>(rows, head, p, &s, &mut st, acc);
            match (pbuf, p + 1 < p1) {
                (Some(pb), true) => s = pv::<V, E, N>(head, &pb, p, acc, Some(rows), ahead),
                (Some(pb), false) => _ = pv::<V, E, N>(head, &pb, p, acc, None, ahead),
                (None, true) => s = scores::<V, E, N>(rows, kt, dk, p + 1),
                (None, false) => {}
            }
        }
    } else {
        for p in p0..p1 {
            next_chunk(p, &mut st, acc);
            let ahead = head.ahead.then(|| Ahead::new::<V, E>(head, p + 1, p + 1, p1));
            let s = scores::<V, E, N>(rows, kt, dk, p);
            if let Some(pb) = softmax::<V, N>(rows, head, p, &s, &mut st, acc) {
                pv::<V, E, N>(head, &pb, p, acc, None, ahead);
            }
        }
    }
    if chunks > 0 {
        fold_chunk(&mut st, acc, &mut ost, folded, dv, false);
    }
    let (st, acc) = if chunks > 0 { (&ost, &*folded) } else { (&st, &*acc) };
    for r in 0..N {
        states[r] = st[r];
        let ap = acc.as_ptr().add(r * dv);
        let o = out[r].as_mut_ptr();
        if rows.chunk.is_some() {
            core::ptr::copy_nonoverlapping(ap, o, dv);
            continue;
        }
        // as `normalise`, on vectors (the same multiplication per lane)
        let inv = if st[r].l > 0.0 { (1.0 / st[r].l) as f32 } else { 0.0 };
        let vi = V::splat(inv);
        for c in (0..dv).step_by(16) {
            V::mul(V::load(ap.add(c)), vi).store(o.add(c));
        }
    }
}

/// Folds the rows' chunk that ends here (`st`, `acc`) into the chunks before it (`ost`,
/// `folded`, zeroed first at the first chunk), and starts the next afresh. Out of the panel
/// loop's way (a call per 512 keys, and one at the end of a tile that crossed a chunk).
#[cold]
#[inline(never)]
fn fold_chunk<const N: usize>(st: &mut [Softmax; N], acc: &mut [f32], ost: &mut [Softmax; N], folded: &mut [f32], dv: usize, first: bool) {
    if first {
        folded.fill(0.0);
    }
    for r in 0..N {
        fold(&mut ost[r], &mut folded[r * dv..(r + 1) * dv], st[r], &acc[r * dv..(r + 1) * dv]);
        st[r] = Softmax::EMPTY;
    }
    acc.fill(0.0);
}

/// The unscaled scores of panel `p`: `s[r] = Σ_d q[r][d] · K[p][d][..]`, d in order.
#[inline(always)]
unsafe fn scores<V: V16, E: Lanes, const N: usize>(rows: &Rows, kt: &[E], dk: usize, p: usize) -> [V; N] {
    let mut s = [V::zero(); N];
    let kp = kt.as_ptr().add(p * dk * KP);
    for d in 0..dk {
        score_step::<V, E, N>(rows, kp, d, &mut s);
    }
    s
}

/// Adds element `d` of the rows' dot products with panel `kp`'s 16 keys.
#[inline(always)]
unsafe fn score_step<V: V16, E: Lanes, const N: usize>(rows: &Rows, kp: *const E, d: usize, s: &mut [V; N]) {
    let k0: V = E::load16(kp.add(d * KP));
    for r in 0..N {
        s[r] = V::fmadd(V::splat(*rows.q[r].get_unchecked(d)), k0, s[r]);
    }
}

/// Panel `p`'s scores `s` (unscaled) into the rows' softmax states (rescaling their
/// accumulators when a max grows); returns the rows' probabilities over the panel, or `None`
/// when no row sees any of its keys.
#[inline(always)]
unsafe fn softmax<V: V16, const N: usize>(rows: &Rows, head: &Head<impl Lanes>, p: usize, s: &[V; N], st: &mut [Softmax; N], acc: &mut [f32]) -> Option<[[f32; KP]; N]> {
    let Head { dv, scale, .. } = *head;
    let mut pbuf = [[0f32; KP]; N];
    let mut live = false;
    for r in 0..N {
        // visible: first[r] <= p·16 + lane <= last[r]
        let (k0, k1) = (p * KP, p * KP + KP - 1);
        if rows.last[r] < k0 || rows.first[r] > k1 {
            continue;
        }
        live = true;
        let (a, b) = (rows.first[r].max(k0) - k0, rows.last[r].min(k1) - k0);
        let sc = V::mul(s[r], V::splat(scale)).keep(a, b);
        let mx = sc.max();
        let Softmax { m, l } = &mut st[r];
        if mx > *m {
            if *l > 0.0 {
                let alpha = (*m - mx).exp();
                *l *= alpha as f64;
                let va = V::splat(alpha);
                let ap = acc.as_mut_ptr().add(r * dv);
                for c in (0..dv).step_by(16) {
                    V::mul(V::load(ap.add(c)), va).store(ap.add(c));
                }
            }
            *m = mx;
        }
        let e = V::sub(sc, V::splat(*m)).exp();
        *l += e.sum_f64();
        e.store(pbuf[r].as_mut_ptr());
    }
    live.then_some(pbuf)
}

/// `acc[r] += Σ_j P[r][j] · V[p·16 + j]`, `V::COLS` columns at a time. With `next` (the rows;
/// `dk == dv`), also panel `p + 1`'s scores, returned: each column block `c .. c + 16·U` runs
/// the score steps `d = c + Uj .. c + U(j + 1)` beside key `j`'s `P·V` step, so `d` goes in order.
/// With `ahead`, its key steps ask for those lines.
#[inline(always)]
unsafe fn pv<V: V16, E: Lanes, const N: usize>(head: &Head<E>, pbuf: &[[f32; KP]; N], p: usize, acc: &mut [f32], next: Option<&Rows>, ahead: Option<Ahead>) -> [V; N] {
    let Head { kt, v, dk, dv, .. } = *head;
    let vp = v.as_ptr().add(p * KP * dv);
    let mut sums = (kt.as_ptr().wrapping_add((p + 1) * dk * KP), [V::zero(); N]);
    let (mut c, mut block) = (0, 0);
    while c + 64 <= dv && V::COLS == 64 {
        pv_block::<V, E, N, 4>(pbuf, vp, dv, c, acc, next.map(|r| (r, &mut sums)), ahead.map(|a| (a, block)));
        (c, block) = (c + 64, block + 1);
    }
    while c < dv {
        pv_block::<V, E, N, 1>(pbuf, vp, dv, c, acc, next.map(|r| (r, &mut sums)), ahead.map(|a| (a, block)));
        (c, block) = (c + 16, block + 1);
    }
    sums.1
}

/// `acc[r][c .. c + 16·U] += Σ_j pbuf[r][j] · V[j][c ..]` for the tile's rows, keys in order;
/// with `scores` = (rows, (K panel, sums)), also the score steps `d = c + Uj .. c + U(j + 1)`;
/// with `ahead` = (lines, this block's index in the `P·V`), every [`ASK_EVERY`]th key asks.
#[inline(always)]
unsafe fn pv_block<V: V16, E: Lanes, const N: usize, const U: usize>(
    pbuf: &[[f32; KP]; N],
    vp: *const E,
    dv: usize,
    c: usize,
    acc: &mut [f32],
    mut scores: Option<(&Rows, &mut (*const E, [V; N]))>,
    ahead: Option<(Ahead, usize)>,
) {
    let mut a = [[V::zero(); U]; N];
    for r in 0..N {
        let ap = acc.as_ptr().add(r * dv + c);
        for u in 0..U {
            a[r][u] = V::load(ap.add(16 * u));
        }
    }
    for j in 0..KP {
        let vr = vp.add(j * dv + c);
        let vv: [V; U] = core::array::from_fn(|u| E::load16(vr.add(16 * u)));
        for r in 0..N {
            let pj = V::splat(pbuf[r][j]);
            for u in 0..U {
                a[r][u] = V::fmadd(pj, vv[u], a[r][u]);
            }
        }
        if let Some((lines, block)) = &ahead {
            if j % ASK_EVERY == 0 {
                lines.ask((block * KP + j) / ASK_EVERY);
            }
        }
        if let Some((rows, (kp, s))) = &mut scores {
            for d in c + U * j..c + U * (j + 1) {
                score_step::<V, E, N>(rows, *kp, d, s);
            }
        }
    }
    for r in 0..N {
        let ap = acc.as_mut_ptr().add(r * dv + c);
        for u in 0..U {
            a[r][u].store(ap.add(16 * u));
        }
    }
}
