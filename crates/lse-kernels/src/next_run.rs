//! The bytes the next streaming matmul will read first, learned from the one that followed last
//! time. A decode step runs the same matmuls in the same order at every step (each layer's, the
//! LM head, then the first layer's again), so the run that came after this one at the last step
//! comes after it at this one. When a run ends, each worker is handed the bytes it will read
//! first in that next run ([`ThreadPool::fetch_while_idle`]), to ask for while it waits through
//! the caller's serial work and the attention between the two. A wrong guess costs memory
//! traffic only: the hint changes no value.

use crate::ThreadPool;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::ops::Range;

/// Each worker's first reads in a run (worker `t` at index `t - 1`; up to 16 threads without a
/// heap allocation).
pub(crate) type FirstReads = SmallVec<[Range<usize>; 15]>;

/// Runs remembered before the table starts again (a few hundred per model).
const MAX_RUNS: usize = 1 << 12;

#[derive(Default)]
struct Followers {
    /// The key of the last streaming run on this thread (0: none, or a run that learns nothing).
    last: usize,
    /// For each run's key, the first reads of the run that followed it.
    next: HashMap<usize, FirstReads, BuildHasherDefault<AddressHasher>>,
}

thread_local! {
    static FOLLOWERS: RefCell<Followers> = RefCell::default();
}

/// A run keyed `key` (the address of the first weight byte it reads), whose workers read
/// `first` first, has ended: remembers it as the follower of the run before it, and hands the
/// workers the first reads of the run that followed it last time (or nothing).
pub(crate) fn ended(pool: &ThreadPool, key: usize, first: FirstReads) {
    FOLLOWERS.with(|f| {
        let mut f = f.borrow_mut();
        let last = std::mem::replace(&mut f.last, key);
        if last != 0 && f.next.get(&last) != Some(&first) {
            if f.next.len() >= MAX_RUNS {
                f.next.clear();
            }
            f.next.insert(last, first);
        }
        let ahead = f.next.get(&key);
        for t in 1..pool.threads() {
            let r = ahead.and_then(|a| a.get(t - 1)).cloned().unwrap_or(0..0);
            pool.fetch_while_idle(t, r);
        }
    });
}

/// A run that learns nothing (a prefill's) ran: the next streaming run follows no one.
pub(crate) fn interrupted() {
    FOLLOWERS.with(|f| f.borrow_mut().last = 0);
}

/// Weight addresses are distinct and 64-byte aligned: a multiply spreads them into the high bits,
/// which are folded onto the low ones (the table picks buckets by those).
#[derive(Default)]
struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, x: usize) {
        let h = (x as u64 >> 6).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = h ^ (h >> 29);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands worker 1 the range the follower read first, whatever ran in between.
    #[test]
    fn learns_the_follower() {
        let pool = ThreadPool::new(2);
        let (a, b) = (0x1000usize, 0x2000usize);
        let reads = |at: usize| -> FirstReads { std::iter::once(at + 64..at + 128).collect() };
        ended(&pool, a, reads(a));
        ended(&pool, b, reads(b));
        FOLLOWERS.with(|f| {
            let f = f.borrow();
            assert_eq!(f.next.get(&a).map(|r| r[0].clone()), Some(b + 64..b + 128));
            assert_eq!(f.last, b);
        });
        interrupted();
        ended(&pool, a, reads(a));
        FOLLOWERS.with(|f| {
            let f = f.borrow();
            assert!(!f.next.contains_key(&b), "a run after an interruption follows no one");
        });
    }
}
