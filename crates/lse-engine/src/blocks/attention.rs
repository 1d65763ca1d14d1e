//! The attention block: Q/K/V projections (+bias), per-head Q/K RMS norms, rope, the KV cache,
//! attention, an optional sigmoid output gate, and the output projection.

use crate::backend::{AttnCall, AttnRows};
use crate::arch::SeqRows;
use crate::kv_cache::LayerKv;
use crate::ops::attn_sinks::{self, SinkCall};
use crate::ops::attn_softcap::{self, SoftcapCall};
use crate::ops::rope::RopeParams;
use crate::{EngineError, ForwardCtx, Matrix, StepList, Weights};

/// The tensors of one attention layer (`blk.{il}.attn_*`).
pub struct AttnWeights {
    pub q: Matrix,
    pub k: Matrix,
    pub v: Matrix,
    pub q_bias: Option<Vec<f32>>,
    pub k_bias: Option<Vec<f32>>,
    pub v_bias: Option<Vec<f32>>,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub o: Matrix,
    pub o_bias: Option<Vec<f32>>,
}

/// Shape and math of one attention layer.
#[derive(Clone, Debug)]
pub struct AttnConfig {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    pub rope: RopeParams,
    /// Multiplies Q after rope (gemma3: 1/sqrt(head_dim)); 1 for none.
    pub q_scale: f32,
    /// Softmax scale on Q·K.
    pub kq_scale: f32,
    /// Per-position Q multiplier after rope (mistral3's temperature tuning).
    pub temp: Option<AttnTemp>,
    /// Attention logit soft-capping: scores become `cap * tanh(score / cap)` (gemma2).
    pub softcap: Option<f32>,
    pub window: Option<usize>,
    /// `attn_q` rows per head are `[q | gate]`; the output is multiplied by sigmoid(gate).
    pub q_gate: bool,
    /// A learned logit per head in every softmax denominator (gpt-oss `attn_sinks`).
    pub sinks: Option<Vec<f32>>,
    pub eps: f32,
}

/// llama.cpp's attention temperature: Q at position `pos` is multiplied by
/// `ln(floor(pos / floor_scale) + 1) * scale + 1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnTemp {
    pub scale: f32,
    /// As f32, the type the formula divides in: an integer here made LLVM convert it (a branch on
    /// its sign bit) before checking that the temperature is set, which valgrind reports as a
    /// jump on uninitialised memory when it is not.
    pub floor_scale: f32,
}

impl AttnTemp {
    pub fn factor(&self, pos: usize) -> f32 {
        let f = (pos as f32 / self.floor_scale).floor() as f64;
        ((f + 1.0).ln() * self.scale as f64 + 1.0) as f32
    }
}

impl AttnConfig {
    /// The total scale Q·K sees (for the report).
    pub fn effective_scale(&self) -> f32 {
        self.q_scale * self.kq_scale
    }
}

impl AttnWeights {
    /// Binds `blk.{il}.attn_{q,k,v,output}` or the fused `attn_qkv` (+ optional biases and q/k norms) for `cfg` on an
    /// `n_embd`-wide residual stream.
    pub fn load(w: &Weights, il: usize, n_embd: usize, cfg: &AttnConfig) -> Result<AttnWeights, EngineError> {
        let p = |s: &str| format!("blk.{il}.{s}");
        let nq = cfg.n_head * cfg.head_dim_k * if cfg.q_gate { 2 } else { 1 };
        let nk = cfg.n_head_kv * cfg.head_dim_k;
        let nv = cfg.n_head_kv * cfg.head_dim_v;
        // a fused `attn_qkv` (rows q, then k, then v) binds as three row ranges
        let ((q, k, v), (q_bias, k_bias, v_bias)) = match w.opt_matrix(&p("attn_qkv.weight"), n_embd, nq + nk + nv)? {
            Some(m) => {
                let part = |r0, n| m.rows(r0, n).ok_or_else(|| EngineError::Metadata(format!("{}: rows {r0}+{n} out of range", m.name)));
                let b = w.opt_vector(&p("attn_qkv.bias"), nq + nk + nv)?;
                let bs = |r0: usize, n: usize| b.as_ref().map(|b| b[r0..r0 + n].to_vec());
                ((part(0, nq)?, part(nq, nk)?, part(nq + nk, nv)?), (bs(0, nq), bs(nq, nk), bs(nq + nk, nv)))
            }
            None => (
                (w.matrix(&p("attn_q.weight"), n_embd, nq)?, w.matrix(&p("attn_k.weight"), n_embd, nk)?, w.matrix(&p("attn_v.weight"), n_embd, nv)?),
                (w.opt_vector(&p("attn_q.bias"), nq)?, w.opt_vector(&p("attn_k.bias"), nk)?, w.opt_vector(&p("attn_v.bias"), nv)?),
            ),
        };
        Ok(AttnWeights {
            q,
            k,
            v,
            q_bias,
            k_bias,
            v_bias,
            q_norm: w.opt_vector(&p("attn_q_norm.weight"), cfg.head_dim_k)?,
            k_norm: w.opt_vector(&p("attn_k_norm.weight"), cfg.head_dim_k)?,
            o: w.matrix(&p("attn_output.weight"), cfg.n_head * cfg.head_dim_v, n_embd)?,
            o_bias: w.opt_vector(&p("attn_output.bias"), n_embd)?,
        })
    }
}

/// One attention layer: weights + config.
pub struct AttnLayer {
    pub w: AttnWeights,
    pub cfg: AttnConfig,
}

/// The attention scale of a stack of layers (its first layer's; 1 for none).
pub fn stack_scale<'a>(mut layers: impl Iterator<Item = &'a AttnLayer>) -> f32 {
    layers.next().map_or(1.0, |a| a.cfg.effective_scale())
}

/// A session of a stack whose every layer holds a KV cache and no other state.
pub fn kv_session<'a>(layers: impl Iterator<Item = &'a AttnLayer>, kv: crate::KvDtype, capacity: usize) -> Result<crate::arch::SessionState, EngineError> {
    let caches = layers.map(|a| a.new_cache(kv.ggml_type(), capacity).map(Some)).collect::<Result<_, _>>()?;
    Ok(crate::arch::SessionState { kv: caches, extra: None })
}

impl AttnLayer {
    /// A fresh cache for this layer.
    pub fn new_cache(&self, ty: lse_gguf::GgmlType, capacity: usize) -> Result<LayerKv, EngineError> {
        LayerKv::new(ty, capacity, self.cfg.n_head_kv, self.cfg.head_dim_k, self.cfg.head_dim_v)
    }

    /// `out` (n × n_embd) = attention output of the normed rows `h` (n × n_embd). Projections run
    /// over all rows; rope and the cache write run per session, then one backend call attends
    /// every session's rows over the cache of layer `il` in its own state.
    pub fn forward(&self, cx: &ForwardCtx, il: usize, seqs: &mut [SeqRows], h: &[f32], n: usize, out: &mut [f32]) -> Result<(), EngineError> {
        let b = cx.backend;
        let c = &self.cfg;
        let (dk, dv) = (c.head_dim_k, c.head_dim_v);
        let mut qg = cx.buffer_for_overwrite(n * self.w.q.n);
        let mut k = cx.buffer_for_overwrite(n * self.w.k.n);
        let mut v = cx.buffer_for_overwrite(n * self.w.v.n);
        b.matmul_many(&[&self.w.q, &self.w.k, &self.w.v], h, n, &mut [&mut qg, &mut k, &mut v]);
        if let Some(bias) = &self.w.q_bias {
            b.add_bias(&mut qg, bias);
        }
        if let Some(bias) = &self.w.k_bias {
            b.add_bias(&mut k, bias);
        }
        if let Some(bias) = &self.w.v_bias {
            b.add_bias(&mut v, bias);
        }
        // split [q | gate] per head
        let (mut q, gate) = if c.q_gate {
            let mut q = cx.buffer_for_overwrite(n * c.n_head * dk);
            let mut g = cx.buffer_for_overwrite(n * c.n_head * dk);
            for (r, src) in qg.chunks_exact(2 * dk).enumerate() {
                q[r * dk..(r + 1) * dk].copy_from_slice(&src[..dk]);
                g[r * dk..(r + 1) * dk].copy_from_slice(&src[dk..]);
            }
            cx.recycle(qg);
            (q, Some(g))
        } else {
            (qg, None)
        };
        if let Some(w) = &self.w.q_norm {
            b.rms_norm(&mut q, dk, w, c.eps);
        }
        if let Some(w) = &self.w.k_norm {
            b.rms_norm(&mut k, dk, w, c.eps);
        }
        let (qw, kw, vw, ow) = (c.n_head * dk, c.n_head_kv * dk, c.n_head_kv * dv, c.n_head * dv);
        let mut att = cx.buffer_for_overwrite(n * ow);
        {
            // rope, Q scaling and the cache write of each session; on the threads when several
            // sessions share the pass (each is a few rows of a decode step)
            let qs = session_rows(&mut q, qw, seqs, il)?;
            let ks = session_rows(&mut k, kw, seqs, il)?;
            let vs = session_rows(&mut v, vw, seqs, il)?;
            let jobs: StepList<std::sync::Mutex<SessionPrep>> = seqs
                .iter_mut()
                .zip(qs.into_iter().zip(ks).zip(vs))
                .map(|(s, ((q, k), v))| {
                    let kv = s.state.kv[il].as_mut().ok_or_else(|| no_cache(il))?;
                    Ok(std::sync::Mutex::new(SessionPrep { q, k, v: &*v, kv, pos0: s.pos0 }))
                })
                .collect::<Result<_, EngineError>>()?;
            let failed = std::sync::Mutex::new(None);
            let prep = |i: usize| {
                let mut j = jobs[i].lock().unwrap_or_else(|e| e.into_inner());
                if let Err(e) = self.prepare_session(b, &mut j) {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                }
            };
            b.run(jobs.len(), &prep);
            if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
                return Err(e);
            }
        }
        // each session's slice of `att`, in row order
        let outs = session_rows(&mut att, ow, seqs, il)?;
        let mut rows = StepList::with_capacity(seqs.len());
        for (s, out) in seqs.iter().zip(outs) {
            let kv = s.state.kv[il].as_ref().ok_or_else(|| no_cache(il))?;
            rows.push(AttnRows { q: &q[s.r0 * qw..(s.r0 + s.n) * qw], n: s.n, pos0: s.pos0, kv, out });
        }
        match c.softcap {
            None => b.attention(&mut rows, &AttnCall { n_head: c.n_head, scale: c.kq_scale, window: c.window })?,
            Some(cap) => {
                let sc = SoftcapCall { n_head: c.n_head, scale: c.kq_scale, window: c.window, cap };
                for r in rows.iter_mut() {
                    attn_softcap::attention(&sc, r.q, r.n, r.pos0, r.kv, r.out, &|n, f| b.run(n, f));
                }
            }
        }
        if let Some(sinks) = &c.sinks {
            let sc = SinkCall { n_head: c.n_head, scale: c.kq_scale, window: c.window, sinks };
            for r in rows.iter_mut() {
                attn_sinks::apply(&sc, r.q, r.n, r.pos0, r.kv, r.out, &|n, f| b.run(n, f));
            }
        }
        drop(rows);
        if let Some(g) = gate {
            b.mul_sigmoid(&mut att, &g);
            cx.recycle(g);
        }
        b.matmul(&self.w.o, &att, n, out);
        if let Some(bias) = &self.w.o_bias {
            b.add_bias(out, bias);
        }
        for buf in [q, k, v, att] {
            cx.recycle(buf);
        }
        Ok(())
    }
}

/// One session's rows of a pass on their way into attention.
struct SessionPrep<'a> {
    q: &'a mut [f32],
    k: &'a mut [f32],
    v: &'a [f32],
    kv: &'a mut LayerKv,
    pos0: usize,
}

impl AttnLayer {
    /// Rope on the session's Q and K rows, Q's scaling, and the K/V rows into its cache.
    fn prepare_session(&self, b: &dyn crate::backend::Backend, j: &mut SessionPrep) -> Result<(), EngineError> {
        let c = &self.cfg;
        let (dk, qw) = (c.head_dim_k, c.n_head * c.head_dim_k);
        b.rope(j.q, c.n_head, j.k, c.n_head_kv, dk, j.pos0, &c.rope);
        if c.q_scale != 1.0 {
            b.scale(j.q, c.q_scale);
        }
        if let Some(t) = &c.temp {
            for (i, row) in j.q.chunks_exact_mut(qw).enumerate() {
                b.scale(row, t.factor(j.pos0 + i));
            }
        }
        let n = j.q.len() / qw;
        b.kv_store(j.kv, j.pos0, n, j.k, j.v)
    }
}

/// `buf` (rows of `width`) cut into each session's rows, in order; an error if the sessions'
/// rows are out of order or past the end.
fn session_rows<'b>(buf: &'b mut [f32], width: usize, seqs: &[SeqRows], il: usize) -> Result<StepList<&'b mut [f32]>, EngineError> {
    let mut parts = StepList::with_capacity(seqs.len());
    let mut rest = buf;
    let mut next = 0;
    for s in seqs {
        if s.r0 < next || (s.r0 + s.n - next) * width > rest.len() {
            return Err(EngineError::Kernel(format!("layer {il}: session rows {}..{} out of order", s.r0, s.r0 + s.n)));
        }
        let (part, tail) = std::mem::take(&mut rest)[(s.r0 - next) * width..].split_at_mut(s.n * width);
        parts.push(part);
        rest = tail;
        next = s.r0 + s.n;
    }
    Ok(parts)
}

fn no_cache(il: usize) -> EngineError {
    EngineError::Kernel(format!("layer {il}: attention without a cache"))
}
