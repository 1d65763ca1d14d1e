//! y[m][n] = Σ_k x[m][k]·W[n][k] for a quantized W.
//!
//! Every activation row is converted once per call to the weight's dot type (in parallel on the
//! pool). Work is split over the pool by ranges of weight rows; inside a range the activation
//! rows are taken `MR` at a time and each weight row is decoded once for all `MR` of them, so a
//! range of weight rows stays in cache while all activation rows stream past it.

use crate::pool::ThreadPool;
use crate::quant::{self, DotType};
use crate::simd::{self, RowKernel, MR};
use crate::Dialect;
use lse_gguf::GgmlType;
use std::cell::RefCell;

/// Target bytes of weights per task range (fits L2 next to the activations in flight).
pub(crate) const RANGE_BYTES: usize = 64 * 1024;
/// Below this many multiply-adds a matmul runs on the calling thread alone.
pub(crate) const SMALL_WORK: usize = 1 << 16;

thread_local! {
    pub(crate) static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Copy)]
enum Kernel {
    Scalar(quant::DotFn),
    Simd(RowKernel),
}

/// The kernel for `t` under `d`, the activation layout it reads and the level whose
/// quantizers produce that layout.
fn select(d: Dialect, t: GgmlType) -> (Kernel, simd::ActLayout, simd::Level) {
    let scalar =
        quant::scalar_dot_fn(t).unwrap_or_else(|| panic!("no kernel for weight type {}", t.name()));
    if d == Dialect::Simd {
        let level = simd::level();
        if let Some(sk) = simd::row_kernel(level, t) {
            return (Kernel::Simd(sk.kern), sk.layout, level);
        }
    }
    (
        Kernel::Scalar(scalar),
        simd::ActLayout::Ggml,
        simd::Level::Scalar,
    )
}

impl Kernel {
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn rows(
        self,
        k: usize,
        w: &[u8],
        x: &[u8],
        x_stride: usize,
        xrb: usize,
        nx: usize,
        out: &mut [f32; MR],
    ) {
        match self {
            Kernel::Scalar(f) => {
                for (j, o) in out.iter_mut().enumerate().take(nx) {
                    *o = f(w, &x[j * x_stride..j * x_stride + xrb]);
                }
            }
            Kernel::Simd(f) => f(k, w, x, x_stride, nx, out),
        }
    }
}

/// A raw output pointer shared by tasks that write disjoint elements.
#[derive(Clone, Copy)]
pub(crate) struct SendPtr<T>(pub(crate) *mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> SendPtr<T> {
    pub(crate) fn get(&self) -> *mut T {
        self.0
    }
}

/// `y[m][n] = Σ_k x[m][k] · W[n][k]`. `w`: `n` rows of `k` elements of type `t`, row-major bytes;
/// `x`: `m` rows of `k` floats; `y`: `m` rows of `n` floats. Activations are converted once per
/// call to the weight's dot type the way llama.cpp does. Panics on an unsupported type, a `k`
/// that is not a multiple of the block size, or short buffers.
#[allow(clippy::too_many_arguments)]
pub fn matmul(
    d: Dialect,
    pool: &ThreadPool,
    t: GgmlType,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
    y: &mut [f32],
) {
    let dt = quant::dot_type(t)
        .unwrap_or_else(|| panic!("matmul: unsupported weight type {}", t.name()));
    let rb = t.row_bytes(k).unwrap_or_else(|| {
        panic!(
            "matmul: k = {k} is not a multiple of the {} block size",
            t.name()
        )
    });
    assert!(
        w.len() >= n * rb,
        "matmul: weight buffer has {} bytes, need {}",
        w.len(),
        n * rb
    );
    assert!(
        x.len() >= m * k,
        "matmul: activations have {} floats, need {}",
        x.len(),
        m * k
    );
    assert!(
        y.len() >= m * n,
        "matmul: output has {} floats, need {}",
        y.len(),
        m * n
    );
    if n == 0 || m == 0 {
        return;
    }
    let (kern, layout, level) = select(d, t);
    let xrb = simd::act_row_bytes(layout, dt, k);

    if dt == DotType::F32 && cfg!(target_endian = "little") {
        // f32 activations are their own dot format.
        // SAFETY: f32 has no invalid bit patterns as bytes; the view covers m·k floats.
        let xb = unsafe { std::slice::from_raw_parts(x.as_ptr() as *const u8, m * k * 4) };
        run_tiles(pool, kern, w, n, k, rb, xb, xrb, m, y);
        return;
    }

    SCRATCH.with(|s| {
        let mut buf = s.borrow_mut();
        if buf.len() < m * xrb {
            buf.resize(m * xrb, 0);
        }
        let qx = &mut buf[..m * xrb];
        quantize_rows(pool, level, layout, dt, x, k, m, qx, xrb);
        run_tiles(pool, kern, w, n, k, rb, qx, xrb, m, y);
    });
}

#[allow(clippy::too_many_arguments)]
/// Converts the `m` activation rows into `qx` (one row of `xrb` bytes each), in parallel.
pub(crate) fn quantize_rows(
    pool: &ThreadPool,
    level: simd::Level,
    layout: simd::ActLayout,
    dt: DotType,
    x: &[f32],
    k: usize,
    m: usize,
    qx: &mut [u8],
    xrb: usize,
) {
    const ROWS_PER_TASK: usize = 8;
    let work = m * k;
    if pool.threads() == 1 || work < 64 * 1024 {
        for r in 0..m {
            simd::quantize_activation(
                level,
                layout,
                dt,
                &x[r * k..(r + 1) * k],
                &mut qx[r * xrb..(r + 1) * xrb],
            );
        }
        return;
    }
    let out = SendPtr(qx.as_mut_ptr());
    let tasks = m.div_ceil(ROWS_PER_TASK);
    pool.run(tasks, &|task| {
        let r0 = task * ROWS_PER_TASK;
        let r1 = (r0 + ROWS_PER_TASK).min(m);
        for r in r0..r1 {
            // SAFETY: each task writes its own disjoint rows of `qx`.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * xrb), xrb) };
            simd::quantize_activation(level, layout, dt, &x[r * k..(r + 1) * k], dst);
        }
    });
}

#[allow(clippy::too_many_arguments)]
fn run_tiles(
    pool: &ThreadPool,
    kern: Kernel,
    w: &[u8],
    n: usize,
    k: usize,
    rb: usize,
    qx: &[u8],
    xrb: usize,
    m: usize,
    y: &mut [f32],
) {
    // Weight rows per task: about RANGE_BYTES of weights, but enough tasks to balance the pool;
    // when there are too few weight rows for that, the activation rows are split as well.
    let threads = pool.threads();
    let mut rows = (RANGE_BYTES / rb.max(1)).clamp(1, 256);
    let mut m_chunk = m;
    if m * n * k < SMALL_WORK {
        // waking the pool costs more than the work
        rows = n;
    } else if threads > 1 {
        let want_tasks = threads * 4;
        rows = rows.min(n.div_ceil(want_tasks)).max(4.min(n));
        let row_tasks = n.div_ceil(rows);
        if row_tasks < want_tasks {
            let m_split = want_tasks
                .div_ceil(row_tasks)
                .min(m.div_ceil(4 * MR))
                .max(1);
            m_chunk = m.div_ceil(m_split).div_ceil(MR) * MR;
        }
    }
    let row_tasks = n.div_ceil(rows);
    let tasks = row_tasks * m.div_ceil(m_chunk);
    let yp = SendPtr(y.as_mut_ptr());
    let body = |task: usize| {
        let r0 = (task % row_tasks) * rows;
        let r1 = (r0 + rows).min(n);
        let i0 = (task / row_tasks) * m_chunk;
        let i1 = (i0 + m_chunk).min(m);
        let mut out = [0.0f32; MR];
        let mut i = i0;
        while i < i1 {
            let nx = (i1 - i).min(MR);
            let xs = &qx[i * xrb..];
            for r in r0..r1 {
                kern.rows(k, &w[r * rb..(r + 1) * rb], xs, xrb, xrb, nx, &mut out);
                for (j, &v) in out.iter().enumerate().take(nx) {
                    // SAFETY: (i + j, r) is inside y and only this task writes the block
                    // (rows i0..i1, columns r0..r1).
                    unsafe { *yp.get().add((i + j) * n + r) = v };
                }
            }
            i += nx;
        }
    };
    if tasks == 1 {
        body(0);
    } else {
        pool.run(tasks, &body);
    }
}

/// Q8_K activation rows (llama.cpp's quantizer) rewritten as Split32: the quants, then per
/// 32-element block the super-block scale `d` (f32), then `d·(bsum₀ + bsum₁)` of the block (f32),
/// or with `sub16` the two sums `bsum₀`, `bsum₁` of its 16-element halves (i32).
#[allow(clippy::too_many_arguments)]
pub(crate) fn quantize_rows_q8k_split(
    pool: &ThreadPool,
    level: simd::Level,
    x: &[f32],
    k: usize,
    m: usize,
    qx: &mut [u8],
    xrb: usize,
    sub16: bool,
) {
    const ROWS_PER_TASK: usize = 8;
    let nb = k / 32;
    let out = SendPtr(qx.as_mut_ptr());
    let task = |t: usize| {
        let mut tmp = Vec::new();
        for r in t * ROWS_PER_TASK..((t + 1) * ROWS_PER_TASK).min(m) {
            // SAFETY: each task writes its own disjoint rows of `qx`.
            let dst = unsafe { std::slice::from_raw_parts_mut(out.get().add(r * xrb), xrb) };
            if simd::quantize_q8k_split32(level, &x[r * k..(r + 1) * k], dst, sub16) {
                continue;
            }
            tmp.resize(DotType::Q8_K.row_bytes(k), 0);
            simd::quantize_activation(level, simd::ActLayout::Ggml, DotType::Q8_K, &x[r * k..(r + 1) * k], &mut tmp);
            for (sb, blk) in tmp.chunks_exact(292).enumerate() {
                let d = f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]);
                dst[256 * sb..256 * sb + 256].copy_from_slice(&blk[4..260]);
                for j in 0..8 {
                    let bs = |g: usize| i16::from_le_bytes([blk[260 + 2 * g], blk[261 + 2 * g]]) as i32;
                    let b = 8 * sb + j;
                    dst[k + 4 * b..k + 4 * b + 4].copy_from_slice(&d.to_le_bytes());
                    if sub16 {
                        let o = k + 4 * nb + 8 * b;
                        dst[o..o + 4].copy_from_slice(&bs(2 * j).to_le_bytes());
                        dst[o + 4..o + 8].copy_from_slice(&bs(2 * j + 1).to_le_bytes());
                    } else {
                        let sum = (bs(2 * j) + bs(2 * j + 1)) as f32;
                        let o = k + 4 * nb + 4 * b;
                        dst[o..o + 4].copy_from_slice(&(d * sum).to_le_bytes());
                    }
                }
            }
        }
    };
    let tasks = m.div_ceil(ROWS_PER_TASK);
    if pool.threads() == 1 || m * k < 64 * 1024 {
        (0..tasks).for_each(task);
    } else {
        pool.run(tasks, &task);
    }
}
