//! A plain read of memory: the yardstick the streaming benches (kernels' `stream`, the engine's
//! `decode`) hold the tiles against.

use lse_kernels::ThreadPool;

/// Wrapping sum of `part` in four independent sums (the loads, not the adds, are the limit),
/// asking for each cache line a page ahead as the tiles do ([`PREFETCH_WORDS`]): the hardware
/// prefetchers stop at page ends, and on the Zen 3 host a read without the hint streamed 5–12 %
/// slower than the one-row tiles that give it.
pub fn sum_words(part: &[u64]) -> [u64; 4] {
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

/// How far ahead [`sum_words`] asks for lines: 4 KiB, the tiles' distance.
const PREFETCH_WORDS: usize = 512;

/// Reads `part` in one pool dispatch of `tasks` contiguous ranges (taken from the pool's counter,
/// as the matmul driver's tasks are).
pub fn read_split(pool: &ThreadPool, part: &[u64], tasks: usize) {
    let chunk = part.len().div_ceil(tasks);
    pool.run(tasks, &|t| {
        std::hint::black_box(sum_words(&part[(t * chunk).min(part.len())..((t + 1) * chunk).min(part.len())]));
    });
}
