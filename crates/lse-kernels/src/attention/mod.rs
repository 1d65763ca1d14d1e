//! Causal (optionally sliding-window) multi-head attention over a KV cache, for prefill.
//!
//! Two kernels with the same contract:
//! * [`AttnKind::Flash`]: tiled over keys with an online softmax (running max and sum); the score
//!   matrix is never materialised (one tile of scores per query row at a time).
//! * [`AttnKind::Dense`]: the full score row of each query (scale, mask, softmax), then `P·V`.
//!
//! Layouts (row-major):
//! * `q`: `n_q` rows of `n_head × head_dim_k` f32; query row `i` sits at position `q_pos0 + i`.
//! * the cache: row `p` (position) holds `n_head_kv` heads, each a row of `head_dim_k` (K) or
//!   `head_dim_v` (V) elements in the cache type (f32, f16, bf16 or q8_0, see [`kv`]).
//! * `out`: `n_q` rows of `n_head × head_dim_v` f32.
//!
//! Query head `h` reads KV head `h / (n_head / n_head_kv)`. Key `p` is visible to a query at
//! position `t` iff `p <= t` and, with a window `w`, `t - p < w`. K and V are read back from the
//! cache type as f32 and Q stays f32, as llama.cpp's tiled CPU kernel does for prefill batches.

mod batch;
mod dense;
mod flash;
pub mod kv;
#[cfg(target_arch = "x86_64")]
mod mirror;
#[cfg(target_arch = "x86_64")]
mod tiled;
mod units;
#[cfg(target_arch = "x86_64")]
pub use mirror::{MirrorView, TiledMirror};
pub use batch::{attention_batch, AttnJob};
mod vec;

use crate::{Dialect, ThreadPool};
use lse_gguf::GgmlType;
use units::{for_tasks, Units};
use vec::VecIsa;

/// Which prefill attention kernel runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKind {
    Flash,
    Dense,
}

/// The cache of one layer as the kernels read it.
#[derive(Clone, Copy, Debug)]
pub struct KvView<'a> {
    pub ty: GgmlType,
    /// `n_kv` rows of `n_head_kv` K heads.
    pub k: &'a [u8],
    /// `n_kv` rows of `n_head_kv` V heads.
    pub v: &'a [u8],
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// The copy of the cache in the tiled kernel's layout, when the caller keeps one.
    #[cfg(target_arch = "x86_64")]
    pub mirror: Option<MirrorView<'a>>,
}

/// Whether flash attention over heads of `dk`/`dv` runs the tiled kernel, which reads a
/// [`TiledMirror`] of the cache when one is kept.
pub fn uses_tiled(d: Dialect, kind: AttnKind, dk: usize, dv: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        kind == AttnKind::Flash && tiled_available(d) && dk.is_multiple_of(16) && dv.is_multiple_of(16)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (d, kind, dk, dv);
        false
    }
}

/// Shape and masking of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnShape {
    pub n_q: usize,
    pub q_pos0: usize,
    pub n_head: usize,
    /// Softmax scale applied to Q·K.
    pub scale: f32,
    /// Sliding window: key `p` visible to query `t` iff `t - p < window`.
    pub window: Option<usize>,
}

impl AttnShape {
    /// The first key visible to the query at position `t`.
    fn first_key(&self, t: usize) -> usize {
        self.window.map_or(0, |w| (t + 1).saturating_sub(w))
    }
}

/// Why an attention call cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttnError(pub String);

impl std::fmt::Display for AttnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AttnError {}

/// Queries per task: every task reads its keys once for this many query rows.
const Q_BLOCK: usize = 16;

/// Runs attention for `shape.n_q` query rows; keys `0 .. q_pos0 + n_q` must be in the cache.
pub fn attention(
    d: Dialect,
    pool: &ThreadPool,
    kind: AttnKind,
    shape: &AttnShape,
    q: &[f32],
    kv: &KvView,
    out: &mut [f32],
) -> Result<(), AttnError> {
    let s = shape;
    let (hk, dk, dv) = (kv.n_head_kv, kv.head_dim_k, kv.head_dim_v);
    if s.n_q == 0 {
        return Ok(());
    }
    let (kb, vb) = check(s, q, kv, out)?;
    let n_kv = s.q_pos0 + s.n_q;

    #[cfg(target_arch = "x86_64")]
    if uses_tiled(d, kind, dk, dv) {
        return attention_tiled(pool, s, q, kv, kb, vb, out);
    }
    // The smallest key any query of this call can see.
    let lo = s.first_key(s.q_pos0);
    let n_keys = n_kv - lo;
    // K and V as f32, [kv_head][pos - lo][dim], converted once per call.

    let mut kf = vec![0f32; hk * n_keys * dk];
    let mut vf = vec![0f32; hk * n_keys * dv];
    {
        let kp = SendPtr(kf.as_mut_ptr());
        let vp = SendPtr(vf.as_mut_ptr());
        let rows_per_task = 64;
        let n_tasks = n_keys.div_ceil(rows_per_task);
        pool.run(n_tasks, &|t| {
            let (kp, vp) = (&kp, &vp);
            for p in t * rows_per_task..((t + 1) * rows_per_task).min(n_keys) {
                for h in 0..hk {
                    let src = (lo + p) * hk + h;
                    // SAFETY: each (h, p) slot is written by exactly one task.
                    let kd = unsafe { std::slice::from_raw_parts_mut(kp.0.add((h * n_keys + p) * dk), dk) };
                    kv::load_row(kv.ty, &kv.k[src * kb..(src + 1) * kb], kd);
                    let vd = unsafe { std::slice::from_raw_parts_mut(vp.0.add((h * n_keys + p) * dv), dv) };
                    kv::load_row(kv.ty, &kv.v[src * vb..(src + 1) * vb], vd);
                }
            }
        });
    }

    let isa = VecIsa::pick(d);
    let units = Units::new(s, hk);
    let units = units.spread(pool.threads(), units.units());
    for_tasks(pool, &units, out, |task, op| {
        let keys_k = &kf[task.g * n_keys * dk..(task.g + 1) * n_keys * dk];
        let keys_v = &vf[task.g * n_keys * dv..(task.g + 1) * n_keys * dv];
        let mut scratch = Scratch::default();
        for r in task.rows.clone() {
            let (i, h) = units.query_head(task, r);
            let t = s.q_pos0 + i;
            let (k0, k1) = (s.first_key(t) - lo, t + 1 - lo);
            let qrow = &q[(i * s.n_head + h) * dk..(i * s.n_head + h + 1) * dk];
            // SAFETY: output row (i, h) belongs to this task only (one of its rows).
            let o = unsafe { std::slice::from_raw_parts_mut(op.0.add((i * s.n_head + h) * dv), dv) };
            let keys = Keys { k: &keys_k[k0 * dk..k1 * dk], v: &keys_v[k0 * dv..k1 * dv], dk, dv };
            match kind {
                AttnKind::Flash => flash::row(isa, qrow, s.scale, &keys, &mut scratch, o),
                AttnKind::Dense => dense::row(isa, qrow, s.scale, &keys, &mut scratch, o),
            }
        }
    });
    Ok(())
}

/// Checks one call's shapes against its cache; returns the bytes of a K and a V row.
fn check(s: &AttnShape, q: &[f32], kv: &KvView, out: &[f32]) -> Result<(usize, usize), AttnError> {
    let (hk, dk, dv) = (kv.n_head_kv, kv.head_dim_k, kv.head_dim_v);
    if hk == 0 || s.n_head == 0 || !s.n_head.is_multiple_of(hk) {
        return Err(AttnError(format!("attention: {} query heads do not group over {} kv heads", s.n_head, hk)));
    }
    if s.window == Some(0) {
        return Err(AttnError("attention: sliding window of 0 keys".into()));
    }
    let kb = kv::kv_row_bytes(kv.ty, dk).ok_or_else(|| AttnError(format!("attention: kv type {kv_ty:?} cannot hold head_dim {dk}", kv_ty = kv.ty)))?;
    let vb = kv::kv_row_bytes(kv.ty, dv).ok_or_else(|| AttnError(format!("attention: kv type {kv_ty:?} cannot hold head_dim {dv}", kv_ty = kv.ty)))?;
    let n_kv = s.q_pos0 + s.n_q;
    if kv.k.len() < n_kv * hk * kb || kv.v.len() < n_kv * hk * vb {
        return Err(AttnError(format!("attention: cache holds fewer than the {n_kv} keys needed")));
    }
    if q.len() != s.n_q * s.n_head * dk || out.len() != s.n_q * s.n_head * dv {
        return Err(AttnError("attention: q/out sizes do not match the shape".into()));
    }
    Ok((kb, vb))
}

/// Whether the tiled flash kernel runs (AVX-512 or AVX2, bit-identical).
#[cfg(target_arch = "x86_64")]
fn tiled_available(d: Dialect) -> bool {
    use crate::simd::{level, Level};
    d == Dialect::Simd && matches!(level(), Level::Avx2 | Level::Avx512)
}

/// The keys the tiled kernel reads for `s`: from `lo` (a multiple of 16) on, `n_keys` of them.
/// Panels start at multiples of 16 absolute positions, so a row meets the same panels (and the
/// same rounding) whatever the batch split: results do not depend on the pass plan.
#[cfg(target_arch = "x86_64")]
fn tiled_span(s: &AttnShape) -> (usize, usize) {
    use tiled::KP;
    let first = s.first_key(s.q_pos0);
    let n_keys = s.q_pos0 + s.n_q - first;
    (first / KP * KP, n_keys + first % KP)
}

/// One KV head's K panels and V rows from key `lo` on, as the tiled kernel reads them.
#[cfg(target_arch = "x86_64")]
enum HeadKeys<'m> {
    F16(&'m [u16], &'m [u16]),
    F32(&'m [f32], &'m [f32]),
}

/// Head `g`'s keys `lo .. lo + 16 n_panels` in a mirror (the caller checked that it holds them).
#[cfg(target_arch = "x86_64")]
fn mirror_head<'m>(m: &MirrorView<'m>, g: usize, lo: usize, n_panels: usize, dk: usize, dv: usize) -> HeadKeys<'m> {
    use tiled::KP;
    let at = |cap: usize| {
        let (k0, v0) = ((g * (cap / KP) + lo / KP) * dk * KP, (g * cap + lo) * dv);
        (k0..k0 + n_panels * dk * KP, v0..v0 + n_panels * KP * dv)
    };
    match *m {
        MirrorView::F16 { kt, v, cap } => {
            let (kr, vr) = at(cap);
            HeadKeys::F16(&kt[kr], &v[vr])
        }
        MirrorView::F32 { kt, v, cap } => {
            let (kr, vr) = at(cap);
            HeadKeys::F32(&kt[kr], &v[vr])
        }
    }
}

/// The mirror of `kv` when it holds every panel `s` reads.
#[cfg(target_arch = "x86_64")]
fn mirror_for<'a>(s: &AttnShape, kv: &KvView<'a>) -> Option<MirrorView<'a>> {
    let (lo, n_keys) = tiled_span(s);
    kv.mirror.filter(|m| lo + n_keys.div_ceil(tiled::KP) * tiled::KP <= m.cap())
}

/// Flash attention with the tiled kernel: the panels read in place from the caller's mirror, or
/// else K converted to f32 and transposed per panel of 16 keys and V to f32 rows (both padded to
/// whole panels with zeros); then tasks of (KV head, `Q_BLOCK` queries) run micro-tiles of
/// `tiled::RM` (query, head) rows.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn attention_tiled(
    pool: &ThreadPool,
    s: &AttnShape,
    q: &[f32],
    kv: &KvView,
    kb: usize,
    vb: usize,
    out: &mut [f32],
) -> Result<(), AttnError> {
    use tiled::KP;
    let (hk, dk, dv) = (kv.n_head_kv, kv.head_dim_k, kv.head_dim_v);
    let (lo, n_keys) = tiled_span(s);
    let n_panels = n_keys.div_ceil(KP);
    let np = n_panels * KP;
    let units = Units::new(s, hk);
    let units = units.spread(pool.threads(), units.units());
    if let Some(m) = mirror_for(s, kv) {
        for_tasks(pool, &units, out, |task, op| match mirror_head(&m, task.g, lo, n_panels, dk, dv) {
            HeadKeys::F16(k, v) => tiled_task(s, q, &units, task, dk, dv, lo, k, v, op, None),
            HeadKeys::F32(k, v) => tiled_task(s, q, &units, task, dk, dv, lo, k, v, op, None),
        });
        return Ok(());
    }
    let mut kt = vec![0f32; hk * np * dk];
    let mut vf = vec![0f32; hk * np * dv];
    {
        let kp = SendPtr(kt.as_mut_ptr());
        let vp = SendPtr(vf.as_mut_ptr());
        // one task per panel: writes panel p of every head
        pool.run(n_panels, &|p| {
            let (kp, vp) = (&kp, &vp);
            let mut tmp = vec![0f32; dk];
            for j in 0..KP {
                let key = p * KP + j;
                if key >= n_keys {
                    break;
                }
                for h in 0..hk {
                    let src = (lo + key) * hk + h;
                    kv::load_row(kv.ty, &kv.k[src * kb..(src + 1) * kb], &mut tmp);
                    let panel = (h * n_panels + p) * dk * KP;
                    for (dd, &x) in tmp.iter().enumerate() {
                        // SAFETY: slot (h, p, dd, j) is written by this task only.
                        unsafe { *kp.0.add(panel + dd * KP + j) = x };
                    }
                    // SAFETY: V row (h, key) is written by this task only.
                    let vd = unsafe { std::slice::from_raw_parts_mut(vp.0.add((h * np + key) * dv), dv) };
                    kv::load_row(kv.ty, &kv.v[src * vb..(src + 1) * vb], vd);
                }
            }
        });
    }
    for_tasks(pool, &units, out, |task, op| {
        let (g, pk, pv) = (task.g, n_panels * dk * KP, np * dv);
        tiled_task(s, q, &units, task, dk, dv, lo, &kt[g * pk..(g + 1) * pk], &vf[g * pv..(g + 1) * pv], op, None)
    });
    Ok(())
}

/// The micro-tiles of `task`'s rows (see [`Units`]); `kt_g` / `v_g` are its KV head's panels and
/// V rows starting at key `lo`. Writes only those rows' outputs; a task of one chunk of keys
/// ([`units::Task::chunk`]) writes its rows' accumulators and states to `parts` instead.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn tiled_task<E: tiled::Lanes>(
    s: &AttnShape,
    q: &[f32],
    units: &Units,
    task: &units::Task,
    dk: usize,
    dv: usize,
    lo: usize,
    kt_g: &[E],
    v_g: &[E],
    op: &SendPtr,
    parts: Option<&ChunkParts>,
) {
    use tiled::RM;
    let head = tiled::Head { kt: kt_g, v: v_g, dk, dv, scale: s.scale, ahead: s.n_q == 1 };
    // the accumulator scratch is taken from this thread's slot and put back at the end
    let mut acc = TILE_ACC.take();
    if acc.len() < 2 * RM * dv {
        acc.resize(2 * RM * dv, 0.0);
    }
    let chunk = task.chunk.zip(parts);
    let mut r0 = task.rows.start;
    while r0 < task.rows.end {
        let n = (task.rows.end - r0).min(RM);
        let mut rows = tiled::Rows { q: [&[][..]; RM], last: [0; RM], first: [0; RM], n, lo_panel: lo / tiled::KP, chunk: chunk.map(|c| c.0) };
        let mut outs: [&mut [f32]; RM] = Default::default();
        for r in 0..n {
            let (i, h) = units.query_head(task, r0 + r);
            let t = s.q_pos0 + i;
            let first = s.first_key(t);
            rows.q[r] = &q[(i * s.n_head + h) * dk..(i * s.n_head + h + 1) * dk];
            rows.last[r] = t - lo;
            rows.first[r] = first - lo;
            let at = match chunk {
                Some((_, p)) => p.acc.0.wrapping_add(units.task_slot(task, r0 + r) * dv),
                None => op.0.wrapping_add((i * s.n_head + h) * dv),
            };
            // SAFETY: output row (i, h), or its slot for this chunk, belongs to this task only.
            outs[r] = unsafe { std::slice::from_raw_parts_mut(at, dv) };
        }
        let mut states = [tiled::Softmax::EMPTY; RM];
        // SAFETY: the CPU has the level's instructions (tiled_available); dk, dv are multiples
        // of 16; the panels cover every key up to the last query's position.
        unsafe {
            if crate::simd::level() == crate::simd::Level::Avx512 {
                tiled::micro_tile_avx512(&rows, &head, &mut acc, &mut outs, &mut states)
            } else {
                tiled::micro_tile_avx2(&rows, &head, &mut acc, &mut outs, &mut states)
            }
        };
        if let Some((_, p)) = chunk {
            for (r, st) in states.iter().enumerate().take(n) {
                // SAFETY: as the accumulator's slot above.
                unsafe { *p.states.wrapping_add(units.task_slot(task, r0 + r)) = *st };
            }
        }
        r0 += n;
    }
    TILE_ACC.set(acc);
}

/// Where the tasks of one chunk of keys leave their rows (see [`units::Task::chunk`]): the row
/// at slot `i` ([`Units::chunk_slot`]) has its accumulator `dv` floats from `acc + i·dv` and its
/// state at `states + i`.
#[cfg(target_arch = "x86_64")]
struct ChunkParts {
    acc: SendPtr,
    states: *mut tiled::Softmax,
    /// The index of this job's first (unit, row range) in the dispatch's counts of finished chunks.
    first_done: usize,
}

#[cfg(target_arch = "x86_64")]
// SAFETY: tasks write disjoint slots only.
unsafe impl Sync for ChunkParts {}

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// The micro-tile's accumulator scratch (`2·RM·dv` floats: a chunk's and the folded chunks'
    /// before it), kept per thread across tasks.
    static TILE_ACC: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The visible keys of one query row, as f32 rows.
pub(crate) struct Keys<'a> {
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub dk: usize,
    pub dv: usize,
}

impl Keys<'_> {
    pub fn len(&self) -> usize {
        self.k.len() / self.dk
    }
}

/// Per-task scratch reused across rows.
#[derive(Default)]
pub(crate) struct Scratch {
    pub scores: Vec<f32>,
}

struct SendPtr(*mut f32);
// SAFETY: used only to hand disjoint output ranges to pool tasks.
unsafe impl Sync for SendPtr {}
unsafe impl Send for SendPtr {}

#[cfg(test)]
mod tests;
