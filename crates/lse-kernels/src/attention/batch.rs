//! Attention for the calls of many sessions at once. The calls whose keys the tiled kernel reads
//! in place (a kept [`super::TiledMirror`], i.e. decoding sessions) share one pool dispatch over
//! all their (KV head, query block) tasks, so a batch of decode rows pays for one dispatch per
//! layer and its threads balance over every session's heads; the other calls (which convert
//! their keys first) run one after another. A task computes its rows exactly as a lone call
//! would, so results do not depend on which calls share the dispatch.

use super::{attention, AttnError, AttnKind, AttnShape, KvView};
use crate::{Dialect, ThreadPool};

/// Calls one batch holds without a heap allocation (a decode step's sessions).
const JOBS: usize = 16;

/// One call of a batch: `shape.n_q` query rows over one cache, as [`attention`] takes them.
pub struct AttnJob<'a> {
    pub shape: AttnShape,
    pub q: &'a [f32],
    pub kv: KvView<'a>,
    pub out: &'a mut [f32],
}

/// Runs every job (see the module note); on an error the jobs before it may have run.
pub fn attention_batch(d: Dialect, pool: &ThreadPool, kind: AttnKind, jobs: &mut [AttnJob]) -> Result<(), AttnError> {
    #[cfg(target_arch = "x86_64")]
    let mut shared: smallvec::SmallVec<[tiled::InPlace; JOBS]> = smallvec::SmallVec::with_capacity(jobs.len());
    for j in jobs.iter_mut() {
        #[cfg(target_arch = "x86_64")]
        if let Some(t) = tiled::in_place(d, kind, j)? {
            shared.push(t);
            continue;
        }
        attention(d, pool, kind, &j.shape, j.q, &j.kv, j.out)?;
    }
    #[cfg(target_arch = "x86_64")]
    tiled::run(pool, &shared);
    Ok(())
}

#[cfg(target_arch = "x86_64")]
mod tiled {
    use super::super::tiled::{fold, normalise, Softmax, CHUNK_PANELS, KP};
    use super::super::units::Task;
    use super::super::{check, mirror_for, mirror_head, tiled_span, tiled_task, uses_tiled, ChunkParts, HeadKeys, MirrorView, SendPtr, Units};
    use std::sync::atomic::AtomicUsize;
    use super::*;
    use smallvec::SmallVec;

    /// A job whose panels are read in place.
    pub(super) struct InPlace<'a> {
        s: AttnShape,
        q: &'a [f32],
        m: MirrorView<'a>,
        hk: usize,
        dk: usize,
        dv: usize,
        lo: usize,
        n_panels: usize,
        out: SendPtr,
    }

    /// The job as an [`InPlace`] when its cache's mirror holds its keys (after checking it).
    pub(super) fn in_place<'a>(d: Dialect, kind: AttnKind, j: &mut AttnJob<'a>) -> Result<Option<InPlace<'a>>, AttnError> {
        let kv = &j.kv;
        if j.shape.n_q == 0 || !uses_tiled(d, kind, kv.head_dim_k, kv.head_dim_v) {
            return Ok(None);
        }
        check(&j.shape, j.q, kv, j.out)?;
        let Some(m) = mirror_for(&j.shape, kv) else { return Ok(None) };
        let (lo, n_keys) = tiled_span(&j.shape);
        Ok(Some(InPlace {
            s: j.shape,
            q: j.q,
            m,
            hk: kv.n_head_kv,
            dk: kv.head_dim_k,
            dv: kv.head_dim_v,
            lo,
            n_panels: n_keys.div_ceil(super::super::tiled::KP),
            out: SendPtr(j.out.as_mut_ptr()),
        }))
    }

    /// One dispatch over the (KV head, query block) tasks of all `jobs`. When they do not share
    /// out evenly and number under two a thread (one SmolLM2 session: 3 KV heads on 2 threads),
    /// each decode row's keys are split by chunks as well, and the last of a unit's chunk tasks
    /// to finish folds their states. One SmolLM2 session on 2 threads, steps alternated in one
    /// process (Zen 4): beside 1,024 / 2,000 / 4,000 keys 2.2 / 6.1 / 3.9 % shorter (the caller's
    /// wait at the end of the dispatch 0.60 → 0.05 ms a step at 2,000). Fewer units than
    /// threads are cut by rows instead (see [`Units::spread`]): one Gemma-3 session's local
    /// layers straddle two chunks unevenly, and split by them its steps were 1–2 % longer.
    pub(super) fn run(pool: &ThreadPool, jobs: &[InPlace]) {
        let threads = pool.threads();
        let units: SmallVec<[Units; JOBS]> = jobs.iter().map(|j| Units::new(&j.s, j.hk)).collect();
        let split = {
            let all = units.iter().map(Units::units).sum::<usize>();
            threads > 1 && (threads..2 * threads).contains(&all) && all % threads != 0
        };
        let units: SmallVec<[Units; JOBS]> = units
            .into_iter()
            .zip(jobs)
            .map(|(u, j)| match j.chunks() {
                (first, n) if split && j.s.n_q == 1 && n > 1 => u.by_chunks(first, n),
                _ => u,
            })
            .collect();
        let all = units.iter().map(Units::tasks).sum();
        let units: SmallVec<[Units; JOBS]> = units.into_iter().map(|u| u.spread(threads, all)).collect();
        let mut starts: SmallVec<[usize; JOBS]> = SmallVec::with_capacity(jobs.len());
        let mut total = 0;
        for u in &units {
            starts.push(total);
            total += u.tasks();
        }
        CHUNK_SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let parts = chunk_parts(jobs, &units, &mut scratch);
            let done = &scratch.done;
            pool.run(total, &|t| {
                let i = starts.partition_point(|&s| s <= t) - 1;
                let (j, u) = (&jobs[i], &units[i]);
                let task = u.task(t - starts[i]);
                let p = parts[i].as_ref();
                match mirror_head(&j.m, task.g, j.lo, j.n_panels, j.dk, j.dv) {
                    HeadKeys::F16(k, v) => tiled_task(&j.s, j.q, u, &task, j.dk, j.dv, j.lo, k, v, &j.out, p),
                    HeadKeys::F32(k, v) => tiled_task(&j.s, j.q, u, &task, j.dk, j.dv, j.lo, k, v, &j.out, p),
                }
                // the last of a unit's chunks to finish folds them (AcqRel: it sees the others' slots)
                if let Some(p) = p {
                    let rows = (t - starts[i]) / u.chunks();
                    if done[p.first_done + rows].fetch_add(1, std::sync::atomic::Ordering::AcqRel) + 1 == u.chunks() {
                        fold_chunks(j, u, p, &task);
                    }
                }
            });
        });
    }

    impl InPlace<'_> {
        /// The first chunk of keys this job reads and how many.
        fn chunks(&self) -> (usize, usize) {
            let first = self.lo / KP / CHUNK_PANELS;
            (first, (self.lo / KP + self.n_panels).div_ceil(CHUNK_PANELS) - first)
        }
    }

    /// Per thread: the chunks' accumulators and states of the last dispatch (kept, so a decode
    /// step allocates nothing).
    #[derive(Default)]
    struct ChunkScratch {
        acc: Vec<f32>,
        states: Vec<Softmax>,
        /// Per (unit, row range): its chunk tasks finished.
        done: Vec<AtomicUsize>,
    }

    thread_local! {
        static CHUNK_SCRATCH: std::cell::RefCell<ChunkScratch> = std::cell::RefCell::default();
    }

    /// The slots of each job whose keys are split by chunks, in `scratch`.
    fn chunk_parts(jobs: &[InPlace], units: &[Units], scratch: &mut ChunkScratch) -> SmallVec<[Option<ChunkParts>; JOBS]> {
        let counted = |u: &Units| if u.chunks() > 1 { u.tasks() / u.chunks() } else { 0 };
        let (mut acc, mut states, mut done) = (0, 0, 0);
        for (j, u) in jobs.iter().zip(units) {
            acc += u.chunk_slots() * j.dv;
            states += u.chunk_slots();
            done += counted(u);
        }
        if scratch.acc.len() < acc {
            scratch.acc.resize(acc, 0.0);
        }
        if scratch.states.len() < states {
            scratch.states.resize(states, Softmax::EMPTY);
        }
        if scratch.done.len() < done {
            scratch.done.resize_with(done, || AtomicUsize::new(0));
        }
        for d in &scratch.done[..done] {
            d.store(0, std::sync::atomic::Ordering::Relaxed);
        }
        // one pointer into each buffer, offset per job (a fresh borrow per job would end the last's)
        let (acc_at, states_at) = (scratch.acc.as_mut_ptr(), scratch.states.as_mut_ptr());
        let (mut a, mut st, mut dn) = (0, 0, 0);
        jobs.iter()
            .zip(units)
            .map(|(j, u)| {
                let n = u.chunk_slots();
                let p = (n > 0).then(|| ChunkParts { acc: SendPtr(acc_at.wrapping_add(a)), states: states_at.wrapping_add(st), first_done: dn });
                (a, st, dn) = (a + n * j.dv, st + n, dn + counted(u));
                p
            })
            .collect()
    }

    /// Folds the chunks of `task`'s rows (a decode row's: query 0) in order, into the first
    /// chunk's slot (a chunk without a key left its accumulator zero: the same as folding from
    /// nothing), and writes their outputs.
    fn fold_chunks(j: &InPlace, u: &Units, p: &ChunkParts, task: &Task) {
        debug_assert_eq!(j.s.n_q, 1, "only decode rows split their keys");
        for r in task.rows.clone() {
            // SAFETY: every chunk task of these rows has written its slot (counted), and none
            // touches them again: this task alone reads them, and writes the first.
            let slot = |c: usize| unsafe {
                let at = u.chunk_slot(task.unit, c, r);
                (*p.states.add(at), std::slice::from_raw_parts_mut(p.acc.0.add(at * j.dv), j.dv))
            };
            let (mut st, folded) = slot(0);
            for c in 1..u.chunks() {
                let (cs, ca) = slot(c);
                fold(&mut st, folded, cs, ca);
            }
            let h = u.query_head(task, r).1;
            // SAFETY: the job's output row of head h, written by this task only.
            let out = unsafe { std::slice::from_raw_parts_mut(j.out.0.add(h * j.dv), j.dv) };
            normalise(st, folded, out);
        }
    }
}
