//! The packed GEMM driver: the activation rows are quantized once per call (and their block sums
//! folded into offset corrections), then the tiles run over groups of 16 weight rows, split into
//! tasks by weight groups (and by activation rows when there are few groups). Several matrices of
//! one width (q/k/v, gate/up) share one pool dispatch and, per activation form (the Q8_0 / Q8_1 /
//! Q8_K rows and offset correction a format reads), one quantization; every output is the
//! tile's, so each equals what its matrix alone would give.

use crate::matmul::{quantize_rows, quantize_rows_q8k_split, SendPtr, RANGE_BYTES, SCRATCH, SMALL_WORK};
use crate::packed::{Fetch, PackedMatrix, PMR, PNR};
use crate::next_run;
use crate::pool::ThreadPool;
use crate::simd;
use smallvec::SmallVec;

/// Matrices one call holds without a heap allocation (q/k/v is three).
const PARTS: usize = 4;

/// `y[m][n] = Σ_k x[m][k]·W[n][k]` for a packed `W` (see [`crate::packed`]).
pub fn matmul_packed(pool: &ThreadPool, p: &PackedMatrix, x: &[f32], m: usize, y: &mut [f32]) {
    matmul_packed_cols(pool, p, x, m, 0..p.n(), y)
}

/// Columns `cols` of the packed product: `y[m][cols.len()]`, `y[i][j] = Σ_k x[i][k]·W[cols.start + j][k]`.
/// `cols.start` must be a multiple of [`PNR`]; each output equals the full product's.
pub fn matmul_packed_cols(
    pool: &ThreadPool,
    p: &PackedMatrix,
    x: &[f32],
    m: usize,
    cols: std::ops::Range<usize>,
    y: &mut [f32],
) {
    assert!(cols.start.is_multiple_of(PNR) && cols.start <= cols.end && cols.end <= p.n(), "matmul_packed: columns {cols:?} of {}", p.n());
    let n = cols.len();
    assert!(y.len() >= m * n, "matmul_packed: output too short");
    run(pool, &[Part { p, c_first: cols.start, n, y: SendPtr(y.as_mut_ptr()) }], x, m);
}

/// `ys[i] = x · ps[i]ᵀ` for matrices of one width `k` (of any packed types), with one pool
/// dispatch and one activation quantization per activation form (matrices of the same type share
/// theirs); each output equals [`matmul_packed`]'s. Panics on mixed widths.
pub fn matmul_packed_many(pool: &ThreadPool, ps: &[&PackedMatrix], x: &[f32], m: usize, ys: &mut [&mut [f32]]) {
    assert_eq!(ps.len(), ys.len(), "matmul_packed_many: one output per matrix");
    let mut parts: SmallVec<[Part; PARTS]> = SmallVec::with_capacity(ps.len());
    for (p, y) in ps.iter().zip(ys.iter_mut()) {
        assert!(p.k() == ps[0].k(), "matmul_packed_many: matrices differ in width");
        assert!(y.len() >= m * p.n(), "matmul_packed: output too short");
        parts.push(Part { p, c_first: 0, n: p.n(), y: SendPtr(y.as_mut_ptr()) });
    }
    run(pool, &parts, x, m);
}

/// One matrix's share of a call: its columns `c_first .. c_first + n`, written to `y` (m × n).
struct Part<'a> {
    p: &'a PackedMatrix,
    c_first: usize,
    n: usize,
    y: SendPtr<f32>,
}

/// How one part's work is cut: `gpt` groups by `m_chunk` activation rows per task.
struct Plan {
    ng: usize,
    gpt: usize,
    gtasks: usize,
    m_chunk: usize,
    tasks: usize,
    /// A decode step's rows (see [`DECODE_ROWS`]): each group's row passes run one after
    /// another, so its bytes come from memory once.
    stream: bool,
}

/// Rows up to which a call streams its weights group by group, every row pass over a group
/// before the next group (a decode step's sessions), instead of every group per row pass from a
/// task's L2-sized range. Beyond one tile's rows this kept 16 sessions' steps reading each
/// weight byte once: steps alternated in one process, 12 / 16 / 32 sessions Qwen2.5-Coder −7 /
/// −7 / −3 %, 16 / 32 Gemma-3 −8 / −4 %, 16 SmolLM2 −3 % (AVX2 kernels, 16: −2 / −6 %).
const DECODE_ROWS: usize = 32;

/// Weight bytes per task when every group is read once (a decode step's few rows): a task's
/// start restarts the memory stream (the hardware prefetchers and the tiles' page-ahead hint),
/// so long runs stream faster; 64 KiB → 1 MiB took a one-row tile on 2 threads from 26–32 to
/// 34–39 GB/s (`cargo bench -p lse-kernels --bench stream`). Many rows keep [`RANGE_BYTES`]: their
/// task's weights are reused by every row pass and must stay in L2.
const STREAM_RANGE_BYTES: usize = 1 << 20;

fn plan(threads: usize, p: &PackedMatrix, n: usize, m: usize) -> Plan {
    let stream = m <= p.rows_per_tile().max(DECODE_ROWS);
    if n == 0 {
        return Plan { ng: 0, gpt: 1, gtasks: 0, m_chunk: m, tasks: 0, stream };
    }
    let k = p.k();
    let ng = n.div_ceil(PNR);
    let range = if stream { STREAM_RANGE_BYTES } else { RANGE_BYTES };
    let mut gpt = (range / p.group_bytes().max(1)).clamp(1, 64 * range / RANGE_BYTES);
    let mut m_chunk = m;
    if m * n * k < SMALL_WORK || threads == 1 {
        gpt = if m * n * k < SMALL_WORK { ng } else { gpt };
    } else {
        let want = threads * 4;
        gpt = gpt.min(ng.div_ceil(want)).max(1);
        let gt = ng.div_ceil(gpt);
        if gt < want {
            let m_split = want.div_ceil(gt).min(m.div_ceil(4 * PMR)).max(1);
            m_chunk = m.div_ceil(m_split).div_ceil(PMR) * PMR;
        }
    }
    let gtasks = ng.div_ceil(gpt);
    Plan { ng, gpt, gtasks, m_chunk, tasks: gtasks * m.div_ceil(m_chunk), stream }
}

/// How a matrix wants its activation rows: parts whose forms are equal share one quantized copy.
struct Form<'a> {
    /// The first matrix of this form (its quantization and offset correction serve them all).
    p: &'a PackedMatrix,
    /// Bytes of one quantized row.
    xrb: usize,
    /// Where this form's rows start in the scratch buffer.
    at: usize,
}

fn run(pool: &ThreadPool, parts: &[Part], x: &[f32], m: usize) {
    let k = parts[0].p.k();
    assert!(x.len() >= m * k, "matmul_packed: activations too short");
    if m == 0 || parts.iter().all(|q| q.n == 0) {
        return;
    }
    // the distinct activation forms, in order of first use, and each part's form
    let mut forms: SmallVec<[Form; PARTS]> = SmallVec::new();
    let mut form_of: SmallVec<[usize; PARTS]> = SmallVec::new();
    let mut need = 0;
    for q in parts {
        let f = match forms.iter().position(|f| f.p.act_form() == q.p.act_form()) {
            Some(f) => f,
            None => {
                forms.push(Form { p: q.p, xrb: q.p.act_row_bytes(), at: need });
                need += m * q.p.act_row_bytes();
                forms.len() - 1
            }
        };
        form_of.push(f);
    }
    let level = simd::level();
    SCRATCH.with(|s| {
        let mut buf = s.borrow_mut();
        if buf.len() < need {
            buf.resize(need, 0);
        }
        // quantizes rows r0..r1 in form `f` into `part` (their bytes) and folds their offset corrections
        let quantize = |f: &Form, r0: usize, r1: usize, part: &mut [u8]| {
            let xs = &x[r0 * k..r1 * k];
            if f.p.q8k_activations() {
                quantize_rows_q8k_split(pool, level, xs, k, r1 - r0, part, f.xrb, f.p.sub16());
            } else {
                quantize_rows(pool, level, simd::ActLayout::Split32, f.p.act_dot_type(), xs, k, r1 - r0, part, f.xrb);
            }
            f.p.fold_corrections(part, r1 - r0, f.xrb);
        };
        let plans: SmallVec<[Plan; PARTS]> = parts.iter().map(|q| plan(pool.threads(), q.p, q.n, m)).collect();
        let total: usize = plans.iter().map(|pl| pl.tasks).sum();
        // A few rows (a decode step's) are quantized by the first tasks of the same dispatch, one
        // share per thread and form, and the tile tasks wait for them: the caller alone took ~2 %
        // of an 8-session step doing it while the workers spun. Tasks are handed out in index
        // order, so every quantizing task is taken before any tile task waits.
        let shares = if total > 1 && m > 1 && m * k < SMALL_WORK && pool.threads() > 1 { pool.threads().min(m) } else { 0 };
        if shares == 0 {
            for f in &forms {
                quantize(f, 0, m, &mut buf[f.at..f.at + m * f.xrb]);
            }
        }
        let split = shares * forms.len();
        let qp = SendPtr(buf.as_mut_ptr());
        let ready = std::sync::atomic::AtomicUsize::new(0);
        let body = |mut task: usize| {
            if task < split {
                // counted even if the share panics, so no tile task waits forever (the pool
                // re-raises the panic when the dispatch ends)
                let _counted = CountOnDrop(&ready);
                let (f, share) = (&forms[task / shares], task % shares);
                let (r0, r1) = (share * m / shares, (share + 1) * m / shares);
                // SAFETY: rows r0..r1 of the form's copy are this task's alone until `ready` counts it.
                quantize(f, r0, r1, unsafe { std::slice::from_raw_parts_mut(qp.get().add(f.at + r0 * f.xrb), (r1 - r0) * f.xrb) });
                return;
            }
            while ready.load(std::sync::atomic::Ordering::Acquire) < split {
                std::hint::spin_loop();
            }
            task -= split;
            let mut i = 0;
            while task >= plans[i].tasks {
                task -= plans[i].tasks;
                i += 1;
            }
            let (q, pl, f) = (&parts[i], &plans[i], &forms[form_of[i]]);
            let g0 = (task % pl.gtasks) * pl.gpt;
            let g1 = (g0 + pl.gpt).min(pl.ng);
            let r0 = (task / pl.gtasks) * pl.m_chunk;
            let r1 = (r0 + pl.m_chunk).min(m);
            let rpt = if pl.stream { q.p.rows_per_tile() } else { q.p.prefill_rows_per_tile() };
            // the tile over groups g..g + groups and the row pass from r
            let tile = |g: usize, groups: usize, r: usize, fetch: Fetch| {
                let (c0, nx) = (g * PNR, (r1 - r).min(rpt));
                // SAFETY: rows r..r+nx of the part's quantized copy exist and are written;
                // outputs (r.., c0..c0+ncols) are inside the part's y and written only by this
                // task; the pack exists only where its kernels run.
                unsafe {
                    q.p.tile(q.c_first / PNR + g, qp.get().add(f.at + r * f.xrb), f.xrb, nx, q.y.get().add(r * q.n + c0), q.n, (q.n - c0).min(groups * PNR), fetch)
                };
            };
            if pl.stream {
                for g in g0..g1 {
                    for r in (r0..r1).step_by(rpt) {
                        tile(g, 1, r, if r == r0 { Fetch::Stream } else { Fetch::Cached });
                    }
                }
            } else {
                // VNNI byte tiles take two groups at once
                let step = if q.p.pairs() { 2 } else { 1 };
                for r in (r0..r1).step_by(rpt) {
                    for g in (g0..g1).step_by(step) {
                        tile(g, step.min(g1 - g), r, if r == r0 { Fetch::Page } else { Fetch::Cached });
                    }
                }
            }
        };
        if split + total == 1 {
            body(0);
        } else if split + total > 1 {
            pool.run(split + total, &body);
        }
        // a decode step's weights come from memory once: let the workers start on the next
        // run's while they wait (a prefill's tiles reread theirs from cache)
        if pool.threads() > 1 && plans.iter().all(|pl| pl.stream && pl.tasks == pl.gtasks) {
            let key = parts[0].p.ptr() as usize + parts[0].c_first / PNR * parts[0].p.group_bytes();
            next_run::ended(pool, key, first_reads(pool.threads(), split, parts, &plans));
        } else {
            next_run::interrupted();
        }
    });
}

/// The most a worker asks for ahead of a run: half of a Zen 4 core's L2.
const AHEAD_BYTES: usize = 512 << 10;

/// The weight bytes each worker reads first in a streaming run of `parts` (its own share of the
/// tasks, in order, after the `split` quantizing tasks; up to [`AHEAD_BYTES`], within the first
/// matrix it reaches).
fn first_reads(threads: usize, split: usize, parts: &[Part], plans: &[Plan]) -> next_run::FirstReads {
    let all = split + plans.iter().map(|pl| pl.tasks).sum::<usize>();
    (1..threads)
        .map(|t| {
            let share = crate::pool::share(t, threads, all);
            let (mut a, mut b) = (share.start.saturating_sub(split), share.end.saturating_sub(split));
            for (q, pl) in parts.iter().zip(plans) {
                if a < pl.tasks {
                    let gb = q.p.group_bytes();
                    let base = q.p.ptr() as usize + (q.c_first / PNR) * gb;
                    let (g0, g1) = (a * pl.gpt, (b.min(pl.tasks) * pl.gpt).min(pl.ng));
                    let start = base + g0 * gb;
                    return start..(base + g1.max(g0) * gb).min(start + AHEAD_BYTES);
                }
                a -= pl.tasks;
                b = b.saturating_sub(pl.tasks);
            }
            0..0
        })
        .collect()
}

/// Adds one to the counter when dropped (also while unwinding).
struct CountOnDrop<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Release);
    }
}
