//! The backend seam: everything model code computes goes through this trait (CPU now).
//! Activations are host `f32` rows; weights are [`Matrix`] views of the model file.

pub mod cpu;

use crate::kv_cache::LayerKv;
use crate::ops::act::Act;
use crate::ops::rope::RopeParams;
use crate::{EngineError, Matrix};
use lse_kernels::Dialect;

pub use cpu::CpuBackend;

/// Masking and scale of one attention call.
#[derive(Clone, Copy, Debug)]
pub struct AttnCall {
    pub n_head: usize,
    /// Softmax scale on Q·K.
    pub scale: f32,
    /// Sliding window (key visible iff q_pos - k_pos < window).
    pub window: Option<usize>,
}

/// One session's query rows of an attention call: `q` is `n × n_head × head_dim_k` (positions
/// `pos0..`), `out` is `n × n_head × head_dim_v`.
pub struct AttnRows<'a> {
    pub q: &'a [f32],
    pub n: usize,
    pub pos0: usize,
    pub kv: &'a LayerKv,
    pub out: &'a mut [f32],
}

pub trait Backend: Send + Sync {
    /// The kernel set in use, e.g. `x86_64-avx2` or `scalar`.
    fn device_arch(&self) -> String;
    fn dialect(&self) -> Dialect;
    /// Runs `f(0..n_tasks)` on the compute threads; returns when all are done. (The pool's run
    /// profile names the caller of this, not the backend.)
    #[track_caller]
    fn run(&self, n_tasks: usize, f: &(dyn Fn(usize) + Sync));

    /// `y[m][n] = sum_k x[m][k] * W[n][k]`.
    fn matmul(&self, w: &Matrix, x: &[f32], m: usize, y: &mut [f32]);
    /// `ys[i] = x · ws[i]ᵀ` for matrices read by the same rows (q/k/v, gate/up); each output
    /// equals `matmul`'s. A backend may share the activations' conversion and one dispatch.
    fn matmul_many(&self, ws: &[&Matrix], x: &[f32], m: usize, ys: &mut [&mut [f32]]) {
        for (w, y) in ws.iter().zip(ys.iter_mut()) {
            self.matmul(w, x, m, y);
        }
    }
    /// Outputs `cols` of the same product (`y` is `m × cols.len()`), each equal to `matmul`'s;
    /// `cols.start` a multiple of [`lse_kernels::packed::PNR`].
    fn matmul_cols(&self, w: &Matrix, x: &[f32], m: usize, cols: std::ops::Range<usize>, y: &mut [f32]);
    /// Rows `ids` of `w`, dequantized to f32 (`ids.len() × w.k`).
    fn get_rows(&self, w: &Matrix, ids: &[u32], out: &mut [f32]);
    /// RMS norm of each `dim`-row of `x` in place, times `w`.
    fn rms_norm(&self, x: &mut [f32], dim: usize, w: &[f32], eps: f32);
    /// Rope on the Q rows `q` (`n_q` heads of `head_dim`) and the K rows `k` (`n_k` heads) of the
    /// same positions, row `t` at position `pos0 + t`.
    #[allow(clippy::too_many_arguments)]
    fn rope(&self, q: &mut [f32], n_q: usize, k: &mut [f32], n_k: usize, head_dim: usize, pos0: usize, p: &RopeParams);
    /// `x[row] += b` for every row of `b.len()`.
    fn add_bias(&self, x: &mut [f32], b: &[f32]);
    /// `x += y`.
    fn add(&self, x: &mut [f32], y: &[f32]);
    /// `x *= s`.
    fn scale(&self, x: &mut [f32], s: f32);
    /// `gate = act(gate) * up`.
    fn glu(&self, act: Act, gate: &mut [f32], up: &[f32]);
    /// `x *= sigmoid(g)`.
    fn mul_sigmoid(&self, x: &mut [f32], g: &[f32]);
    /// `cap * tanh(x / cap)`.
    fn softcap(&self, x: &mut [f32], cap: f32);
    /// Stores `n` K/V rows at `pos0` (rounding them to the cache dtype).
    fn kv_store(&self, kv: &mut LayerKv, pos0: usize, n: usize, k: &[f32], v: &[f32]) -> Result<(), EngineError>;
    /// Attention of each session's rows over its own cache, all sessions in one call (so their
    /// work can share the threads). Flash or dense as the engine options say.
    fn attention(&self, rows: &mut [AttnRows], call: &AttnCall) -> Result<(), EngineError>;
}
