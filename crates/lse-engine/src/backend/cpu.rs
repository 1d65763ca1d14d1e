//! The CPU backend: lse-kernels for matmul, dequantization and attention; `ops` for the rest.

use super::{AttnCall, AttnRows, Backend};
use crate::kv_cache::LayerKv;
use crate::ops::{act, norm, rope};
use crate::{EngineError, Matrix};
use lse_kernels::attention::{self, AttnJob, AttnKind, AttnShape};
use lse_kernels::{Dialect, ThreadPool};
use smallvec::SmallVec;

pub struct CpuBackend {
    dialect: Dialect,
    pool: ThreadPool,
    flash: bool,
}

impl CpuBackend {
    pub fn new(dialect: Dialect, threads: usize, flash: bool) -> CpuBackend {
        CpuBackend { dialect, pool: ThreadPool::new(threads.max(1)), flash }
    }

    pub fn pool(&self) -> &ThreadPool {
        &self.pool
    }

    fn kind(&self) -> AttnKind {
        if self.flash {
            AttnKind::Flash
        } else {
            AttnKind::Dense
        }
    }
}

/// Splits `x` into chunks of whole `row`-element rows (at most about `target` elements each, as
/// even as whole rows allow) and runs `f` on every chunk (with its first row index) on the pool.
fn par_rows(pool: &ThreadPool, x: &mut [f32], row: usize, target: usize, f: &(dyn Fn(&mut [f32], usize) + Sync)) {
    if row == 0 || x.is_empty() {
        return;
    }
    let rows = x.len() / row;
    let n_tasks = rows.div_ceil((target / row).max(1));
    if n_tasks <= 1 || pool.threads() <= 1 {
        f(x, 0);
        return;
    }
    // even chunks: one decode row of a 4864-wide FFN was 4096 + 768 elements, the first thread's
    // share the whole run's time
    let per = rows.div_ceil(n_tasks);
    let n_tasks = rows.div_ceil(per);
    // tasks touch disjoint row ranges of `x`, which outlives `run`
    let p = RowsPtr(x.as_mut_ptr());
    pool.run(n_tasks, &|t| {
        let p = &p;
        let r0 = t * per;
        let r1 = ((t + 1) * per).min(rows);
        // SAFETY: rows r0..r1 belong to this task only.
        let chunk = unsafe { std::slice::from_raw_parts_mut(p.0.add(r0 * row), (r1 - r0) * row) };
        f(chunk, r0);
    });
}

/// A buffer's start shared by tasks that each touch their own rows of it.
struct RowsPtr(*mut f32);
// SAFETY: only ever dereferenced for disjoint rows, while the buffer outlives the pool run.
unsafe impl Sync for RowsPtr {}

/// Elements per task for the elementwise ops.
const PAR_CHUNK: usize = 1 << 15;

/// Elements per task for the gated activation: smaller, so that a decode step's few rows (8
/// sessions: 8 × the FFN width) are shared by the threads instead of run by the caller alone.
const GLU_CHUNK: usize = 1 << 12;

/// A KV store of at most this many rows (decode steps) starts the f32 copy of the cache.
#[cfg(target_arch = "x86_64")]
const MIRROR_FROM_ROWS: usize = 16;

impl Backend for CpuBackend {
    fn device_arch(&self) -> String {
        lse_kernels::device_arch(self.dialect).to_string()
    }

    fn dialect(&self) -> Dialect {
        self.dialect
    }

    #[track_caller]
    fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync)) {
        self.pool.run(n_tasks, f);
    }

    fn matmul(&self, w: &Matrix, x: &[f32], m: usize, y: &mut [f32]) {
        if self.dialect == Dialect::Simd && lse_kernels::packable(w.ty) {
            if let Some(p) = w.packed(&self.pool) {
                return lse_kernels::matmul_packed(&self.pool, p, x, m, y);
            }
        }
        lse_kernels::matmul(self.dialect, &self.pool, w.ty, w.bytes(), w.n, w.k, x, m, y);
    }

    fn matmul_many(&self, ws: &[&Matrix], x: &[f32], m: usize, ys: &mut [&mut [f32]]) {
        let same_width = ws.iter().all(|w| w.k == ws[0].k);
        if self.dialect == Dialect::Simd && same_width && ws.iter().all(|w| lse_kernels::packable(w.ty)) {
            let packed: Option<SmallVec<[&lse_kernels::PackedMatrix; 4]>> = ws.iter().map(|w| w.packed(&self.pool)).collect();
            if let Some(ps) = packed {
                return lse_kernels::matmul_packed_many(&self.pool, &ps, x, m, ys);
            }
        }
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            self.matmul(w, x, m, y);
        }
    }

    fn matmul_cols(&self, w: &Matrix, x: &[f32], m: usize, cols: std::ops::Range<usize>, y: &mut [f32]) {
        if self.dialect == Dialect::Simd && lse_kernels::packable(w.ty) {
            if let Some(p) = w.packed(&self.pool) {
                return lse_kernels::matmul_packed_cols(&self.pool, p, x, m, cols, y);
            }
        }
        let rb = w.row_bytes();
        let rows = &w.bytes()[cols.start * rb..cols.end * rb];
        lse_kernels::matmul(self.dialect, &self.pool, w.ty, rows, cols.len(), w.k, x, m, y);
    }

    fn get_rows(&self, w: &Matrix, ids: &[u32], out: &mut [f32]) {
        let rb = w.row_bytes();
        let data = w.bytes();
        for (&id, dst) in ids.iter().zip(out.chunks_exact_mut(w.k)) {
            let id = id as usize;
            lse_kernels::dequantize_row(w.ty, &data[id * rb..(id + 1) * rb], dst);
        }
    }

    fn rms_norm(&self, x: &mut [f32], dim: usize, w: &[f32], eps: f32) {
        par_rows(&self.pool, x, dim, PAR_CHUNK, &|c, _| norm::rms_norm(c, dim, Some(w), eps));
    }

    fn rope(&self, q: &mut [f32], n_q: usize, k: &mut [f32], n_k: usize, head_dim: usize, pos0: usize, p: &rope::RopeParams) {
        let (qw, kw) = (n_q * head_dim, n_k * head_dim);
        assert!(qw > 0 && k.len() / kw.max(1) == q.len() / qw, "rope: Q and K rows differ");
        let kp = RowsPtr(k.as_mut_ptr());
        par_rows(&self.pool, q, qw, PAR_CHUNK, &|qc, r0| {
            let kp = &kp;
            // SAFETY: rows r0.. of `k` belong to the task holding the same rows of `q`.
            let kc = unsafe { std::slice::from_raw_parts_mut(kp.0.add(r0 * kw), qc.len() / qw * kw) };
            rope::rope_qk(qc, n_q, kc, n_k, head_dim, pos0 + r0, p)
        });
    }

    fn add_bias(&self, x: &mut [f32], b: &[f32]) {
        if b.is_empty() {
            return;
        }
        for row in x.chunks_exact_mut(b.len()) {
            for (v, bb) in row.iter_mut().zip(b) {
                *v += bb;
            }
        }
    }

    fn add(&self, x: &mut [f32], y: &[f32]) {
        for (a, b) in x.iter_mut().zip(y) {
            *a += b;
        }
    }

    fn scale(&self, x: &mut [f32], s: f32) {
        for a in x.iter_mut() {
            *a *= s;
        }
    }

    fn glu(&self, a: act::Act, gate: &mut [f32], up: &[f32]) {
        let n = gate.len().min(up.len());
        let (gate, up) = (&mut gate[..n], &up[..n]);
        // element-wise: any split gives the same values (the kernels are position-independent)
        let d = self.dialect;
        par_rows(&self.pool, gate, 1, GLU_CHUNK, &|c, r0| {
            let u = &up[r0..r0 + c.len()];
            match a {
                // vector exp (about 1 ulp of libm) under the Simd dialect
                act::Act::Silu => lse_kernels::act::swiglu(d, c, u),
                // the same bits at every dialect
                act::Act::GeluTanh => lse_kernels::act::geglu(d, c, u),
            }
        });
    }

    fn mul_sigmoid(&self, x: &mut [f32], g: &[f32]) {
        for (a, b) in x.iter_mut().zip(g) {
            *a *= act::sigmoid(*b);
        }
    }

    fn softcap(&self, x: &mut [f32], cap: f32) {
        lse_kernels::reduce::softcap(self.dialect, x, cap);
    }

    fn kv_store(&self, kv: &mut LayerKv, pos0: usize, n: usize, k: &[f32], v: &[f32]) -> Result<(), EngineError> {
        kv.store(pos0, n, k, v)?;
        #[cfg(target_arch = "x86_64")]
        // The f32 copy pays off when a cache is read again and again a few rows at a time (decode);
        // a prefill-only session (a scoring window) converts its panels per call and holds none.
        // Both ways read the same f32 panels, so the logits do not depend on which one ran.
        if attention::uses_tiled(self.dialect, self.kind(), kv.head_dim_k, kv.head_dim_v) && (kv.has_mirror() || n <= MIRROR_FROM_ROWS) {
            kv.update_mirror(pos0, n);
        }
        Ok(())
    }

    fn attention(&self, rows: &mut [AttnRows], call: &AttnCall) -> Result<(), EngineError> {
        let mut jobs: crate::StepList<AttnJob> = rows
            .iter_mut()
            .map(|r| AttnJob {
                shape: AttnShape { n_q: r.n, q_pos0: r.pos0, n_head: call.n_head, scale: call.scale, window: call.window },
                q: r.q,
                kv: r.kv.view(),
                out: &mut *r.out,
            })
            .collect();
        attention::attention_batch(self.dialect, &self.pool, self.kind(), &mut jobs).map_err(|e| EngineError::Kernel(e.to_string()))
    }
}
