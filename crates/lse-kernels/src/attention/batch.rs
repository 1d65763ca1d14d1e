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
    use super::super::{check, mirror_for, mirror_head, tiled_span, tiled_task, uses_tiled, HeadKeys, MirrorView, SendPtr, Units};
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

    /// One dispatch over the (KV head, query block) tasks of all `jobs`.
    pub(super) fn run(pool: &ThreadPool, jobs: &[InPlace]) {
        // each job's task split (over the units of all jobs), and its first task
        let units: SmallVec<[Units; JOBS]> = jobs.iter().map(|j| Units::new(&j.s, j.hk)).collect();
        let all = units.iter().map(Units::units).sum();
        let units: SmallVec<[Units; JOBS]> = units.into_iter().map(|u| u.spread(pool.threads(), all)).collect();
        let mut starts: SmallVec<[usize; JOBS]> = SmallVec::with_capacity(jobs.len());
        let mut total = 0;
        for u in &units {
            starts.push(total);
            total += u.tasks();
        }
        pool.run(total, &|t| {
            let i = starts.partition_point(|&s| s <= t) - 1;
            let (j, u) = (&jobs[i], &units[i]);
            let task = u.task(t - starts[i]);
            match mirror_head(&j.m, task.g, j.lo, j.n_panels, j.dk, j.dv) {
                HeadKeys::F16(k, v) => tiled_task(&j.s, j.q, u, &task, j.dk, j.dv, j.lo, k, v, &j.out),
                HeadKeys::F32(k, v) => tiled_task(&j.s, j.q, u, &task, j.dk, j.dv, j.lo, k, v, &j.out),
            }
        });
    }
}
