//! A plain read of memory: the yardstick the streaming benches (kernels' `stream`, the engine's
//! `decode`) hold the tiles against.

use lse_kernels::ThreadPool;

/// Wrapping sum of `part` in four independent sums (the loads, not the adds, are the limit).
pub fn sum_words(part: &[u64]) -> [u64; 4] {
    let mut acc = [0u64; 4];
    for c in part.chunks_exact(4) {
        for i in 0..4 {
            acc[i] = acc[i].wrapping_add(c[i]);
        }
    }
    acc
}

/// Reads `part` in one pool dispatch of `tasks` contiguous ranges (taken from the pool's counter,
/// as the matmul driver's tasks are).
pub fn read_split(pool: &ThreadPool, part: &[u64], tasks: usize) {
    let chunk = part.len().div_ceil(tasks);
    pool.run(tasks, &|t| {
        std::hint::black_box(sum_words(&part[(t * chunk).min(part.len())..((t + 1) * chunk).min(part.len())]));
    });
}
