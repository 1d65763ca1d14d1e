//! A plain read of memory: the yardstick the streaming benches (kernels' `stream`, the engine's
//! `decode`) hold the tiles against, and the median both report.

use lse_kernels::ThreadPool;

/// `n` words to read (their indices), on huge pages where the kernel gives them, as the packed
/// weights are: the yardstick reads memory the way the tiles do.
pub fn words(n: usize) -> Vec<u64> {
    let mut v = lse_kernels::pages::huge_page_vec(n, 0u64);
    v.iter_mut().enumerate().for_each(|(i, w)| *w = i as u64);
    v
}

/// Wrapping sums of `part`, read with the CPU's widest vector loads (the tiles' own width: the
/// scalar loop this replaced streamed 17–28 % slower than a one-row tile on the Emerald Rapids
/// host, so tiles showed "110 %" of it), asking for each cache line a page ahead as the prefill
/// tiles do ([`PREFETCH_WORDS`]): the hardware prefetchers stop at page ends, and on the Zen 3
/// host a read without the hint streamed 5–12 % slower than the one-row tiles that give it.
pub fn sum_words(part: &[u64]) -> [u64; 4] {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: each runs only where the CPU has its instructions.
        if std::arch::is_x86_feature_detected!("avx512f") {
            return unsafe { vector::sum_avx512(part) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return unsafe { vector::sum_avx2(part) };
        }
    }
    let mut acc = [0u64; 4];
    for (i, line) in part.chunks(8).enumerate() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        unsafe {
            use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T2};
            _mm_prefetch::<_MM_HINT_T2>(part.as_ptr().wrapping_add(8 * i + PREFETCH_WORDS) as *const i8);
        }
        for c in line.chunks_exact(4) {
            for i in 0..4 {
                acc[i] = acc[i].wrapping_add(c[i]);
            }
        }
    }
    acc
}

/// [`sum_words`] four cache lines at a time, one sum per line; the tail as scalars.
#[cfg(target_arch = "x86_64")]
mod vector {
    use super::PREFETCH_WORDS;
    use core::arch::x86_64::*;

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn sum_avx512(part: &[u64]) -> [u64; 4] {
        let mut acc = [_mm512_setzero_si512(); 4];
        let done = each_line(part, |j, at| acc[j] = _mm512_add_epi64(acc[j], _mm512_loadu_si512(at as *const _)));
        tail(part, done, acc.map(|a| _mm512_reduce_add_epi64(a) as u64))
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn sum_avx2(part: &[u64]) -> [u64; 4] {
        let mut acc = [_mm256_setzero_si256(); 4];
        let done = each_line(part, |j, at| {
            let two = _mm256_add_epi64(_mm256_loadu_si256(at as *const _), _mm256_loadu_si256(at.add(4) as *const _));
            acc[j] = _mm256_add_epi64(acc[j], two);
        });
        let mut lanes = [0u64; 4];
        for a in acc {
            let mut w = [0u64; 4];
            _mm256_storeu_si256(w.as_mut_ptr() as *mut _, a);
            for (l, x) in lanes.iter_mut().zip(w) {
                *l = l.wrapping_add(x);
            }
        }
        tail(part, done, lanes)
    }

    /// Calls `add(j, line)` for the whole lines of `part`, four at a time (`j`: which of the four),
    /// asking for each a page ahead; returns the words covered.
    #[inline(always)]
    unsafe fn each_line(part: &[u64], mut add: impl FnMut(usize, *const u64)) -> usize {
        let (p, lines) = (part.as_ptr(), part.len() / 8);
        let mut i = 0;
        while i + 4 <= lines {
            for j in 0..4 {
                let at = p.add(8 * (i + j));
                _mm_prefetch::<_MM_HINT_T2>(at.wrapping_add(PREFETCH_WORDS) as *const i8);
                add(j, at);
            }
            i += 4;
        }
        8 * i
    }

    fn tail(part: &[u64], from: usize, mut acc: [u64; 4]) -> [u64; 4] {
        for w in &part[from..] {
            acc[0] = acc[0].wrapping_add(*w);
        }
        acc
    }
}

/// How far ahead [`sum_words`] asks for lines: 4 KiB, the prefill tiles' distance. The decode
/// tiles' 8 KiB read slower here (one Zen 4 thread: 28.4–28.9 GB/s against 34.7–40.9; two the
/// same), so the yardstick keeps the distance that reads fastest.
const PREFETCH_WORDS: usize = 512;

/// Reads `part` in one pool dispatch of `tasks` contiguous ranges (taken from the pool's counter,
/// as the matmul driver's tasks are).
pub fn read_split(pool: &ThreadPool, part: &[u64], tasks: usize) {
    let chunk = part.len().div_ceil(tasks);
    pool.run(tasks, &|t| {
        std::hint::black_box(sum_words(&part[(t * chunk).min(part.len())..((t + 1) * chunk).min(part.len())]));
    });
}

/// The median of `v` (0 when empty): what a change of the steady state moves, less swayed by the
/// neighbours' bursts on a shared machine than a total.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
