//! qwen35 (Qwen3.5 dense): a hybrid stack of gated delta net (GDN) linear-attention layers and
//! gated full-attention layers, each followed by a SwiGLU FFN.
//!
//! Layer `il`: `x += mixer(rms(x) * attn_norm)`, then `x += mlp(rms(x) * post_attention_norm)`.
//!
//! * Recurrent layers (`attention.recurrent_layers[il]`, or llama.cpp's rule
//!   `(il + 1) % full_attention_interval != 0`, interval 4 by default) run the GDN:
//!   `attn_qkv` -> causal depthwise conv (`ssm_conv1d`, kernel `ssm.conv_kernel`) -> SiLU -> split
//!   `[q | k | v]`; q, k L2-normalised per head; `beta = sigmoid(ssm_beta x)`,
//!   `g = softplus(ssm_alpha x + ssm_dt.bias) * ssm_a`; the gated delta rule
//!   ([`crate::ops::delta_net`]) with value head `h` reading key head `h % n_k_heads`; then
//!   `rmsnorm(o) * ssm_norm * silu(attn_gate x)` per value head and `ssm_out`.
//!   Their conv and delta-rule states live in the session ([`Qwen35State`]) and carry across
//!   ubatches and passes.
//! * The other layers are full attention with `attn_q` rows per head `[q | gate]`, per-head q/k
//!   RMS norms, rope on the first `rope.dimension_count` dims (IMROPE; for text every section
//!   shares the token position, which makes it NEOX rope), GQA, and the output times
//!   `sigmoid(gate)` before `attn_output`.
//!
//! Geometry from `{arch}.ssm.*`: `state_size` = key head dim, `group_count` = key heads,
//! `time_step_rank` = value heads, `inner_size` = value heads × value head dim, `conv_kernel`.
//! Layers past `block_count - nextn_predict_layers` (multi-token-prediction blocks) are not run.

use super::{standard_attn, Architecture, SeqRows, SessionState};
use crate::backend::Backend;
use crate::blocks::attention::{AttnLayer, AttnWeights};
use crate::blocks::ffn::Ffn;
use crate::blocks::mlp::Mlp;
use crate::ops::act::Act;
use crate::ops::delta_net::{self, GdnInputs, GdnShape};
use crate::ops::rope::RopeKind;
use crate::ops::ssm_conv;
use crate::{EngineError, ForwardCtx, KvDtype, Matrix, Weights};
use std::sync::Mutex;

/// State elements updated per call (tokens × heads × d_k × d_v) below which the delta rule runs
/// on the calling thread.
const PARALLEL_MIN_WORK: usize = 1 << 18;

/// Geometry shared by every GDN layer.
#[derive(Clone, Copy, Debug)]
struct GdnDims {
    shape: GdnShape,
    kernel: usize,
    /// Channels of the conv: `[q | k | v]` = 2 · n_k_heads · d_k + n_v_heads · d_v.
    conv_dim: usize,
}

/// Tensors of one GDN layer.
struct GdnLayer {
    qkv: Matrix,
    z: Matrix,
    beta: Matrix,
    alpha: Matrix,
    /// `conv_dim` rows of `kernel` taps.
    conv: Vec<f32>,
    dt_bias: Vec<f32>,
    a: Vec<f32>,
    norm: Vec<f32>,
    out: Matrix,
}

enum Mixer {
    Gdn(GdnLayer),
    Attn(AttnLayer),
}

struct Layer {
    attn_norm: Vec<f32>,
    mixer: Mixer,
    ffn_norm: Vec<f32>,
    mlp: Ffn,
}

pub struct Qwen35 {
    layers: Vec<Layer>,
    gdn: GdnDims,
    n_embd: usize,
    eps: f32,
}

/// Recurrent state of a session: per layer, the conv history (`(kernel-1) × conv_dim`) and the
/// delta-rule state (`n_v_heads × d_v × d_k`); both empty for attention layers.
#[derive(Clone)]
pub struct Qwen35State {
    pub conv: Vec<Vec<f32>>,
    pub ssm: Vec<Vec<f32>>,
}

impl super::RecurrentState for Qwen35State {
    fn reset(&mut self) {
        self.conv.iter_mut().chain(self.ssm.iter_mut()).for_each(|v| v.fill(0.0));
    }
    fn bytes(&self) -> usize {
        self.conv.iter().chain(self.ssm.iter()).map(|v| v.len() * 4).sum()
    }
    fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
        self
    }
    fn clone_box(&self) -> Box<dyn super::RecurrentState> {
        Box::new(self.clone())
    }
    fn buffers(&self) -> Vec<&[f32]> {
        self.conv.iter().chain(&self.ssm).map(Vec::as_slice).collect()
    }
    fn buffers_mut(&mut self) -> Vec<&mut [f32]> {
        self.conv.iter_mut().chain(&mut self.ssm).map(Vec::as_mut_slice).collect()
    }
}

fn meta(msg: String) -> EngineError {
    EngineError::Metadata(msg)
}

/// Which of the first `n_layer` layers are recurrent.
fn recurrent_layers(w: &Weights, n_layer: usize, n_layer_all: usize) -> Result<Vec<bool>, EngineError> {
    if let Some(v) = w.key("attention.recurrent_layers") {
        let arr = v.as_array().ok_or_else(|| meta("attention.recurrent_layers is not an array".into()))?;
        let flags: Option<Vec<bool>> = arr.iter().map(|x| x.as_bool().or_else(|| x.as_u64().map(|u| u != 0))).collect();
        match flags {
            Some(f) if f.len() == n_layer_all || f.len() == n_layer => return Ok(f[..n_layer].to_vec()),
            _ => return Err(meta(format!("attention.recurrent_layers must hold {n_layer_all} booleans"))),
        }
    }
    let interval = w.key_u64("full_attention_interval").unwrap_or(4) as usize;
    if interval == 0 {
        return Err(meta("full_attention_interval must be positive".into()));
    }
    Ok((0..n_layer).map(|i| (i + 1) % interval != 0).collect())
}

fn gdn_dims(w: &Weights) -> Result<GdnDims, EngineError> {
    let req = |k: &str| -> Result<usize, EngineError> {
        w.key_u64(k).map(|v| v as usize).ok_or_else(|| meta(format!("missing or non-integer key {}.{k}", w.hp.arch)))
    };
    let kernel = req("ssm.conv_kernel")?;
    let d_k = req("ssm.state_size")?;
    let n_k_heads = req("ssm.group_count")?;
    let n_v_heads = req("ssm.time_step_rank")?;
    let inner = req("ssm.inner_size")?;
    if kernel == 0 || d_k == 0 || n_k_heads == 0 || n_v_heads == 0 || inner == 0 {
        return Err(meta("ssm.* sizes must be positive".into()));
    }
    if !inner.is_multiple_of(n_v_heads) || !n_v_heads.is_multiple_of(n_k_heads) {
        return Err(meta(format!("ssm geometry: inner_size {inner} must split into {n_v_heads} value heads, a multiple of {n_k_heads} key heads")));
    }
    let shape = GdnShape { n_k_heads, n_v_heads, d_k, d_v: inner / n_v_heads };
    Ok(GdnDims { shape, kernel, conv_dim: 2 * shape.qk_width() + shape.v_width() })
}

impl GdnLayer {
    fn load(w: &Weights, il: usize, e: usize, d: &GdnDims) -> Result<GdnLayer, EngineError> {
        let p = |s: &str| format!("blk.{il}.{s}");
        let s = d.shape;
        Ok(GdnLayer {
            qkv: w.matrix(&p("attn_qkv.weight"), e, d.conv_dim)?,
            z: w.matrix(&p("attn_gate.weight"), e, s.v_width())?,
            beta: w.matrix(&p("ssm_beta.weight"), e, s.n_v_heads)?,
            alpha: w.matrix(&p("ssm_alpha.weight"), e, s.n_v_heads)?,
            conv: w.tensor_f32(&p("ssm_conv1d.weight"), &[d.kernel, d.conv_dim])?,
            dt_bias: w.vector(&p("ssm_dt.bias"), s.n_v_heads)?,
            a: w.vector(&p("ssm_a"), s.n_v_heads)?,
            norm: w.vector(&p("ssm_norm.weight"), s.d_v)?,
            out: w.matrix(&p("ssm_out.weight"), s.v_width(), e)?,
        })
    }

    /// `out` (n × n_embd) = the GDN mixer applied to the normed rows `h`, advancing each session's
    /// conv and delta-rule states of layer `il` over its own rows.
    #[allow(clippy::too_many_arguments)] // the layer's dimensions, its sessions' rows and their buffers
    fn forward(&self, cx: &ForwardCtx, d: &GdnDims, eps: f32, il: usize, seqs: &mut [SeqRows], h: &[f32], n: usize, out: &mut [f32]) -> Result<(), EngineError> {
        let b = cx.backend;
        let s = d.shape;
        let (qkw, vw, cd, nh) = (s.qk_width(), s.v_width(), d.conv_dim, s.n_v_heads);
        let mut qkv = vec![0f32; n * cd];
        let mut z = vec![0f32; n * vw];
        let mut beta = vec![0f32; n * nh];
        let mut g = vec![0f32; n * nh];
        b.matmul(&self.qkv, h, n, &mut qkv);
        b.matmul(&self.z, h, n, &mut z);
        b.matmul(&self.beta, h, n, &mut beta);
        b.matmul(&self.alpha, h, n, &mut g);
        delta_net::gdn_gates(&mut beta, &mut g, &self.dt_bias, &self.a);

        let mut cv = vec![0f32; n * cd];
        let mut o = vec![0f32; n * vw];
        for sq in seqs.iter_mut() {
            let st = recurrent_state(sq.state)?;
            let rows = sq.r0..sq.r0 + sq.n;
            let cvs = &mut cv[rows.start * cd..rows.end * cd];
            ssm_conv::causal_conv1d_silu(&qkv[rows.start * cd..rows.end * cd], cd, &self.conv, d.kernel, &mut st.conv[il], cvs);
            for row in cvs.chunks_exact_mut(cd) {
                delta_net::l2_normalize(&mut row[..2 * qkw], s.d_k, eps);
            }
            let (gs, bs) = (&g[rows.start * nh..rows.end * nh], &beta[rows.start * nh..rows.end * nh]);
            let inp = GdnInputs { q: cvs, k: &cvs[qkw..], v: &cvs[2 * qkw..], stride: cd, g: gs, beta: bs };
            let parallel = sq.n * s.state_len() >= PARALLEL_MIN_WORK;
            let os = delta_rule_heads(b, &s, &inp, sq.n, &mut st.ssm[il], parallel);
            o[rows.start * vw..rows.end * vw].copy_from_slice(&os);
        }
        delta_net::gated_rms_norm(&mut o, &z, &self.norm, eps);
        b.matmul(&self.out, &o, n, out);
        Ok(())
    }
}

fn recurrent_state(st: &mut SessionState) -> Result<&mut Qwen35State, EngineError> {
    st.extra
        .as_mut()
        .and_then(|s| s.as_any_mut().downcast_mut::<Qwen35State>())
        .ok_or_else(|| EngineError::Kernel("qwen35 session without recurrent state".into()))
}

/// The gated delta rule for all value heads (one pool task per head when `parallel`; waking the
/// pool costs more than a short recurrence), returned as `n` token-major rows of `v_width`.
fn delta_rule_heads(b: &dyn Backend, s: &GdnShape, inp: &GdnInputs<'_>, n: usize, state: &mut [f32], parallel: bool) -> Vec<f32> {
    let per = s.d_k * s.d_v;
    let mut o_heads = vec![0f32; n * s.v_width()];
    {
        // each head owns its state block and a head-major block of outputs
        let jobs: Vec<Mutex<(&mut [f32], &mut [f32])>> =
            state.chunks_exact_mut(per).zip(o_heads.chunks_exact_mut(n * s.d_v)).map(Mutex::new).collect();
        let head = |hv: usize| {
            let mut job = jobs[hv].lock().unwrap_or_else(|p| p.into_inner());
            let (st, o) = &mut *job;
            delta_net::gated_delta_rule_head(s, hv, inp, n, st, o, s.d_v);
        };
        if parallel {
            b.run(s.n_v_heads, &head);
        } else {
            (0..s.n_v_heads).for_each(head);
        }
    }
    let vw = s.v_width();
    let mut o = vec![0f32; n * vw];
    for (hv, blk) in o_heads.chunks_exact(n * s.d_v).enumerate() {
        for (t, src) in blk.chunks_exact(s.d_v).enumerate() {
            o[t * vw + hv * s.d_v..][..s.d_v].copy_from_slice(src);
        }
    }
    o
}

pub fn load(w: &Weights) -> Result<Box<dyn Architecture>, EngineError> {
    load_with(w, &|w, il| Ok(Ffn::Dense(Box::new(Mlp::load(w, il, w.hp.n_embd, Act::Silu)?))))
}

/// The qwen35 stack with each layer's FFN bound by `ffn(w, il)` (qwen35moe: experts).
pub fn load_with(w: &Weights, ffn: &dyn Fn(&Weights, usize) -> Result<Ffn, EngineError>) -> Result<Box<dyn Architecture>, EngineError> {
    let hp = &w.hp;
    let e = hp.n_embd;
    let n_nextn = w.key_u64("nextn_predict_layers").unwrap_or(0) as usize;
    if n_nextn >= hp.n_layer {
        return Err(meta(format!("nextn_predict_layers {n_nextn} leaves no layers of {}", hp.n_layer)));
    }
    let n_layer = hp.n_layer - n_nextn;
    let recr = recurrent_layers(w, n_layer, hp.n_layer)?;
    let gdn = gdn_dims(w)?;
    let layers = (0..n_layer)
        .map(|il| {
            let mixer = if recr[il] {
                Mixer::Gdn(GdnLayer::load(w, il, e, &gdn)?)
            } else {
                let mut cfg = standard_attn(w, il, RopeKind::Neox)?;
                cfg.q_gate = true;
                for t in ["q", "k"] {
                    let name = format!("blk.{il}.attn_{t}_norm.weight");
                    if !w.has(&name) {
                        return Err(EngineError::MissingTensor(name));
                    }
                }
                Mixer::Attn(AttnLayer { w: AttnWeights::load(w, il, e, &cfg)?, cfg })
            };
            Ok(Layer {
                attn_norm: w.vector(&format!("blk.{il}.attn_norm.weight"), e)?,
                mixer,
                ffn_norm: w.vector(&format!("blk.{il}.post_attention_norm.weight"), e)?,
                mlp: ffn(w, il)?,
            })
        })
        .collect::<Result<Vec<_>, EngineError>>()?;
    Ok(Box::new(Qwen35 { layers, gdn, n_embd: e, eps: hp.eps }))
}

impl Architecture for Qwen35 {
    fn attention_scale(&self) -> f32 {
        self.layers
            .iter()
            .find_map(|l| match &l.mixer {
                Mixer::Attn(a) => Some(a.cfg.effective_scale()),
                Mixer::Gdn(_) => None,
            })
            .unwrap_or(1.0)
    }

    fn new_session(&self, capacity: usize, kv: KvDtype) -> Result<SessionState, EngineError> {
        let mut caches = Vec::with_capacity(self.layers.len());
        let mut conv = Vec::with_capacity(self.layers.len());
        let mut ssm = Vec::with_capacity(self.layers.len());
        for l in &self.layers {
            match &l.mixer {
                Mixer::Attn(a) => {
                    caches.push(Some(a.new_cache(kv.ggml_type(), capacity)?));
                    conv.push(Vec::new());
                    ssm.push(Vec::new());
                }
                Mixer::Gdn(_) => {
                    caches.push(None);
                    conv.push(vec![0f32; ssm_conv::conv_state_len(self.gdn.kernel, self.gdn.conv_dim)]);
                    ssm.push(vec![0f32; self.gdn.shape.state_len()]);
                }
            }
        }
        Ok(SessionState { kv: caches, extra: Some(Box::new(Qwen35State { conv, ssm })) })
    }

    fn forward(&self, cx: &ForwardCtx, seqs: &mut [SeqRows], x: &mut [f32], n: usize) -> Result<(), EngineError> {
        let b = cx.backend;
        let e = self.n_embd;
        if x.len() != n * e {
            return Err(EngineError::InvalidRequest(format!("qwen35 forward: {} floats for {n} rows of {e}", x.len())));
        }
        let mut h = vec![0f32; n * e];
        let mut o = vec![0f32; n * e];
        for (il, layer) in self.layers.iter().enumerate() {
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &layer.attn_norm, self.eps);
            match &layer.mixer {
                Mixer::Gdn(g) => g.forward(cx, &self.gdn, self.eps, il, seqs, &h, n, &mut o)?,
                Mixer::Attn(a) => a.forward(cx, il, seqs, &h, n, &mut o)?,
            }
            b.add(x, &o);
            h.copy_from_slice(x);
            b.rms_norm(&mut h, e, &layer.ffn_norm, self.eps);
            layer.mlp.forward(cx, &h, n, &mut o);
            b.add(x, &o);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::CpuBackend;
    use crate::Dialect;

    #[test]
    fn parallel_heads_match_sequential_rule() {
        let s = GdnShape { n_k_heads: 2, n_v_heads: 6, d_k: 8, d_v: 4 };
        let n = 9;
        let w = 2 * s.qk_width() + s.v_width();
        let mut seed = 17u64;
        let mut r = |amp: f32| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * amp
        };
        let mut rows: Vec<f32> = (0..n * w).map(|_| r(2.0)).collect();
        for row in rows.chunks_exact_mut(w) {
            delta_net::l2_normalize(&mut row[..2 * s.qk_width()], s.d_k, 1e-6);
        }
        let g: Vec<f32> = (0..n * s.n_v_heads).map(|_| -r(1.0).abs()).collect();
        let beta: Vec<f32> = (0..n * s.n_v_heads).map(|_| 0.5 + r(0.9)).collect();
        let inp = GdnInputs { q: &rows, k: &rows[s.qk_width()..], v: &rows[2 * s.qk_width()..], stride: w, g: &g, beta: &beta };
        let init: Vec<f32> = (0..s.state_len()).map(|_| r(0.5)).collect();

        let mut st_ref = init.clone();
        let mut want = vec![0f32; n * s.v_width()];
        delta_net::gated_delta_rule(&s, &inp, n, &mut st_ref, &mut want);

        let b = CpuBackend::new(Dialect::Scalar, 3, false);
        for parallel in [false, true] {
            let mut st = init.clone();
            let got = delta_rule_heads(&b, &s, &inp, n, &mut st, parallel);
            assert_eq!(got, want, "parallel={parallel}");
            assert_eq!(st, st_ref, "parallel={parallel}");
        }
    }
}
