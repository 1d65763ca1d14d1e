//! How an attention call's work becomes pool tasks. A unit is one (KV head, block of `Q_BLOCK`
//! queries); its rows are its (query, head of the group) pairs, in query-major order. Where a
//! dispatch has fewer units than threads (a decoding Gemma-3 session has one) each unit is cut
//! into row ranges so no thread idles. Rows are independent in every kernel, so the cut changes
//! no value. It is not cut further: a pass over the keys costs about the same for 1 row as for 4
//! (each row's scores are one chain of FMAs, bound by their latency), so balancing 3 units on 2
//! threads by single rows was slower (SmolLM2 one session 241 → 190 tokens/s).
//! A decode dispatch whose units do not share out evenly splits each unit's keys by chunks
//! instead ([`Units::by_chunks`]): each task reads its share of the keys once, and the last of a
//! unit's chunk tasks folds their states (the bits the unsplit tile gives, see
//! [`super::tiled::fold`]).

use super::{AttnShape, SendPtr, Q_BLOCK};
use crate::ThreadPool;
use std::ops::Range;

#[derive(Clone, Copy)]
pub(crate) struct Units {
    n_q: usize,
    group: usize,
    blocks: usize,
    /// Rows of a full unit.
    rows: usize,
    units: usize,
    parts: usize,
    /// Chunks of keys per unit (1: a task reads all of them) and the first one's index.
    chunks: usize,
    first_chunk: usize,
}

/// One task: KV head `g`, query block `b` (unit `unit`), the range of that unit's rows it
/// computes, and the chunk of keys when the keys are split.
pub(crate) struct Task {
    pub g: usize,
    pub b: usize,
    pub unit: usize,
    pub rows: Range<usize>,
    pub chunk: Option<usize>,
}

impl Units {
    /// One task per unit of a call of shape `s` over `hk` KV heads.
    pub(crate) fn new(s: &AttnShape, hk: usize) -> Units {
        let (group, blocks) = (s.n_head / hk, s.n_q.div_ceil(Q_BLOCK));
        Units { n_q: s.n_q, group, blocks, rows: s.n_q.min(Q_BLOCK) * group, units: hk * blocks, parts: 1, chunks: 1, first_chunk: 0 }
    }

    pub(crate) fn units(&self) -> usize {
        self.units
    }

    /// Cut into row ranges when the dispatch holds fewer than `threads` units in `all` (this
    /// call's and those sharing the dispatch).
    pub(crate) fn spread(self, threads: usize, all: usize) -> Units {
        let parts = if all >= threads { 1 } else { threads.div_ceil(all).min(self.rows) };
        Units { parts, ..self }
    }

    /// Each unit's keys in `chunks` tasks, from chunk `first` on (absolute chunk indices).
    pub(crate) fn by_chunks(self, first: usize, chunks: usize) -> Units {
        Units { chunks: chunks.max(1), first_chunk: first, ..self }
    }

    pub(crate) fn chunks(&self) -> usize {
        self.chunks
    }

    /// Where the tasks of one chunk leave their rows (a split call's scratch): row `r` of unit
    /// `unit`'s chunk `c` (counted from the call's first) at `(unit·chunks + c)·rows + r`, of
    /// [`Units::chunk_slots`].
    pub(crate) fn chunk_slot(&self, unit: usize, c: usize, r: usize) -> usize {
        (unit * self.chunks + c) * self.rows + r
    }

    /// [`Units::chunk_slot`] of row `r` of `task` (a task of one chunk).
    pub(crate) fn task_slot(&self, task: &Task, r: usize) -> usize {
        self.chunk_slot(task.unit, task.chunk.map_or(0, |c| c - self.first_chunk), r)
    }

    /// Slots of a call split by chunks (0 when it is not).
    pub(crate) fn chunk_slots(&self) -> usize {
        if self.chunks > 1 {
            self.units * self.chunks * self.rows
        } else {
            0
        }
    }

    pub(crate) fn tasks(&self) -> usize {
        self.units * self.parts * self.chunks
    }

    /// Task `t`; its rows stop at the unit's last query (the last block may be short). A unit's
    /// chunks are neighbouring tasks, so a thread's share reads a head's keys in order.
    pub(crate) fn task(&self, t: usize) -> Task {
        let (unit, rest) = (t / (self.parts * self.chunks), t % (self.parts * self.chunks));
        let (part, chunk) = (rest / self.chunks, rest % self.chunks);
        let b = unit % self.blocks;
        let real = (self.n_q - b * Q_BLOCK).min(Q_BLOCK) * self.group;
        let (r0, r1) = (part * self.rows / self.parts, (part + 1) * self.rows / self.parts);
        let chunk = (self.chunks > 1).then_some(self.first_chunk + chunk);
        Task { g: unit / self.blocks, b, unit, rows: r0.min(real)..r1.min(real), chunk }
    }

    /// Query index and query head of row `r` of task `t`'s unit.
    pub(crate) fn query_head(&self, t: &Task, r: usize) -> (usize, usize) {
        (t.b * Q_BLOCK + r / self.group, t.g * self.group + r % self.group)
    }
}

/// Runs `f(task, out)` on the pool for every task of `units`; a task may write only the output
/// rows of its own rows.
pub(crate) fn for_tasks(pool: &ThreadPool, units: &Units, out: &mut [f32], f: impl Fn(&Task, &SendPtr) + Sync) {
    let op = SendPtr(out.as_mut_ptr());
    pool.run(units.tasks(), &|t| f(&units.task(t), &op));
}
