//! The mixture-of-experts FFN (llama.cpp's `build_moe_ffn`): router logits (`ffn_gate_inp`) ->
//! gating -> the top `n_expert_used` experts per row -> their weights (renormalised / scaled as
//! the model says) -> gated experts -> weighted sum, plus an optional shared expert.
//!
//! The pass's rows are grouped by expert and each active expert runs one matmul over its rows
//! (`mul_mat_id`), so an expert's weights are read once per launch and unselected experts not at
//! all. A row's result does not depend on the other rows: matmuls are per-row exact, and a row's
//! expert outputs are summed in its own top-k order.

use super::mlp::Mlp;
use crate::ops::act::Act;
use crate::{EngineError, ForwardCtx, Matrix, Weights};

/// How router logits become expert probabilities.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gating {
    /// Softmax over all experts, then top-k of the probabilities.
    Softmax,
    /// Top-k of the logits, then softmax over the selected ones (gpt-oss).
    SoftmaxSelected,
}

/// The experts' gated activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExpertAct {
    /// `silu(gate) * up`.
    Silu,
    /// gpt-oss: `g = min(gate, limit)`, `u = clamp(up, ±limit)`, `g * sigmoid(alpha g) * (u + 1)`.
    SwigluOai { alpha: f32, limit: f32 },
}

#[derive(Clone, Copy, Debug)]
pub struct MoeConfig {
    pub n_expert: usize,
    pub n_used: usize,
    pub gating: Gating,
    /// Divide the selected weights by their sum (`expert_weights_norm`).
    pub norm_weights: bool,
    /// Multiply the weights by this (`expert_weights_scale`; 0 or 1 = none).
    pub weights_scale: f32,
    pub act: ExpertAct,
}

impl MoeConfig {
    /// Expert counts from `{arch}.expert_count` / `expert_used_count`; gating softmax, no
    /// renormalisation, scale from `expert_weights_scale`.
    pub fn from_keys(w: &Weights) -> Result<MoeConfig, EngineError> {
        let meta = |m: String| EngineError::Metadata(m);
        let arch = &w.hp.arch;
        let n_expert = w.key_u64("expert_count").ok_or_else(|| meta(format!("missing key {arch}.expert_count")))? as usize;
        let n_used = w.key_u64("expert_used_count").ok_or_else(|| meta(format!("missing key {arch}.expert_used_count")))? as usize;
        if n_expert == 0 || n_used == 0 || n_used > n_expert {
            return Err(meta(format!("{arch}: {n_used} experts used of {n_expert}")));
        }
        Ok(MoeConfig {
            n_expert,
            n_used,
            gating: Gating::Softmax,
            norm_weights: w.key_bool("expert_weights_norm").unwrap_or(false),
            weights_scale: w.key_f32("expert_weights_scale").unwrap_or(0.0),
            act: ExpertAct::Silu,
        })
    }
}

/// Gate and up projections of the experts: separate tensors, or one fused `[gate | up]` tensor.
enum GateUp {
    Split { gate: Vec<Matrix>, up: Vec<Matrix> },
    Fused(Vec<Matrix>),
}

/// The shared expert, added to every row: `mlp(h) * sigmoid(gate · h)` (ungated without `gate`).
pub struct SharedExpert {
    pub mlp: Mlp,
    pub gate: Option<Matrix>,
}

pub struct Moe {
    cfg: MoeConfig,
    n_ff: usize,
    router: Matrix,
    router_bias: Option<Vec<f32>>,
    gate_up: GateUp,
    down: Vec<Matrix>,
    /// Per-expert biases (`n_expert × n_ff` / `n_expert × n_embd`), gpt-oss.
    gate_bias: Option<Vec<f32>>,
    up_bias: Option<Vec<f32>>,
    down_bias: Option<Vec<f32>>,
    shared: Option<SharedExpert>,
}

impl Moe {
    /// Binds `blk.{il}.ffn_gate_inp`, `ffn_{gate,up}_exps` or `ffn_gate_up_exps`, `ffn_down_exps`
    /// (+ `.bias` where present) and the shared expert `ffn_{gate,up,down}_shexp` with its gate
    /// `ffn_gate_inp_shexp` when present. The expert width comes from `ffn_down_exps`.
    pub fn load(w: &Weights, il: usize, cfg: MoeConfig) -> Result<Moe, EngineError> {
        let e = w.hp.n_embd;
        let ne = cfg.n_expert;
        let t = |s: &str| format!("blk.{il}.ffn_{s}");
        let down_name = t("down_exps.weight");
        let n_ff = match w.tensor_info(&down_name) {
            Some(ti) if ti.dims.len() == 3 => ti.dims[0] as usize,
            Some(ti) => return Err(EngineError::ShapeMismatch { name: down_name, got: ti.dims.clone(), want: vec![0, e as u64, ne as u64] }),
            None => return Err(EngineError::MissingTensor(down_name)),
        };
        let exps = |s: &str, k: usize, n: usize| w.opt_expert_matrices(&t(s), k, n, ne);
        let gate_up = match exps("gate_up_exps.weight", e, 2 * n_ff)? {
            Some(f) => GateUp::Fused(f),
            None => GateUp::Split {
                gate: exps("gate_exps.weight", e, n_ff)?.ok_or_else(|| EngineError::MissingTensor(t("gate_exps.weight")))?,
                up: exps("up_exps.weight", e, n_ff)?.ok_or_else(|| EngineError::MissingTensor(t("up_exps.weight")))?,
            },
        };
        let down = exps("down_exps.weight", n_ff, e)?.ok_or_else(|| EngineError::MissingTensor(down_name.clone()))?;
        let bias = |s: &str, len: usize| -> Result<Option<Vec<f32>>, EngineError> {
            let name = t(s);
            if w.has(&name) {
                w.tensor_f32(&name, &[len, ne]).map(Some)
            } else {
                Ok(None)
            }
        };
        let shared = if w.has(&t("up_shexp.weight")) {
            let n_sh = w.tensor_info(&t("up_shexp.weight")).map_or(0, |ti| ti.dims.get(1).copied().unwrap_or(0) as usize);
            Some(SharedExpert {
                mlp: Mlp {
                    gate: w.matrix(&t("gate_shexp.weight"), e, n_sh)?,
                    up: w.matrix(&t("up_shexp.weight"), e, n_sh)?,
                    down: w.matrix(&t("down_shexp.weight"), n_sh, e)?,
                    act: Act::Silu,
                },
                gate: w.opt_matrix(&t("gate_inp_shexp.weight"), e, 1)?,
            })
        } else {
            None
        };
        Ok(Moe {
            router: w.matrix(&t("gate_inp.weight"), e, ne)?,
            router_bias: w.opt_vector(&t("gate_inp.bias"), ne)?,
            gate_up,
            down,
            gate_bias: bias("gate_exps.bias", n_ff)?,
            up_bias: bias("up_exps.bias", n_ff)?,
            down_bias: bias("down_exps.bias", e)?,
            shared,
            n_ff,
            cfg,
        })
    }

    /// `out` (n × n_embd) = the block applied to the normed rows `h` (n × n_embd).
    pub fn forward(&self, cx: &ForwardCtx, h: &[f32], n: usize, out: &mut [f32]) {
        let b = cx.backend;
        let e = h.len() / n.max(1);
        let (ne, k, ff) = (self.cfg.n_expert, self.cfg.n_used, self.n_ff);

        let mut logits = cx.buffer(n * ne);
        b.matmul(&self.router, h, n, &mut logits);
        if let Some(bias) = &self.router_bias {
            b.add_bias(&mut logits, bias);
        }
        let mut sel = vec![0usize; n * k];
        let mut wts = vec![0f32; n * k];
        for r in 0..n {
            route(&self.cfg, &logits[r * ne..][..ne], &mut sel[r * k..][..k], &mut wts[r * k..][..k]);
        }
        cx.recycle(logits);

        // rows per expert, in row order: (row, slot)
        let mut groups: Vec<Vec<(usize, usize)>> = vec![Vec::new(); ne];
        for (i, &x) in sel.iter().enumerate() {
            groups[x].push((i / k, i % k));
        }
        // ys[(row * k + slot)] = that expert's output for that row
        let mut ys = vec![0f32; n * k * e];
        for (x, rows) in groups.iter().enumerate().filter(|(_, g)| !g.is_empty()) {
            let m = rows.len();
            let mut xin = cx.buffer(m * e);
            for (dst, &(r, _)) in xin.chunks_exact_mut(e).zip(rows) {
                dst.copy_from_slice(&h[r * e..][..e]);
            }
            let mut g = cx.buffer(m * ff);
            let mut u = cx.buffer(m * ff);
            match &self.gate_up {
                GateUp::Split { gate, up } => {
                    b.matmul(&gate[x], &xin, m, &mut g);
                    b.matmul(&up[x], &xin, m, &mut u);
                }
                GateUp::Fused(gu) => {
                    let mut both = cx.buffer(m * 2 * ff);
                    b.matmul(&gu[x], &xin, m, &mut both);
                    for ((src, gd), ud) in both.chunks_exact(2 * ff).zip(g.chunks_exact_mut(ff)).zip(u.chunks_exact_mut(ff)) {
                        gd.copy_from_slice(&src[..ff]);
                        ud.copy_from_slice(&src[ff..]);
                    }
                    cx.recycle(both);
                }
            }
            if let Some(bias) = &self.gate_bias {
                b.add_bias(&mut g, &bias[x * ff..][..ff]);
            }
            if let Some(bias) = &self.up_bias {
                b.add_bias(&mut u, &bias[x * ff..][..ff]);
            }
            match self.cfg.act {
                ExpertAct::Silu => b.glu(Act::Silu, &mut g, &u),
                ExpertAct::SwigluOai { alpha, limit } => swiglu_oai(&mut g, &u, alpha, limit),
            }
            let mut d = cx.buffer(m * e);
            b.matmul(&self.down[x], &g, m, &mut d);
            if let Some(bias) = &self.down_bias {
                b.add_bias(&mut d, &bias[x * e..][..e]);
            }
            for (src, &(r, s)) in d.chunks_exact(e).zip(rows) {
                ys[(r * k + s) * e..][..e].copy_from_slice(src);
            }
            for buf in [xin, g, u, d] {
                cx.recycle(buf);
            }
        }

        // weighted sum in each row's top-k order (llama.cpp: (y0 w0 + y1 w1) + ...)
        for r in 0..n {
            let o = &mut out[r * e..][..e];
            for s in 0..k {
                let wgt = wts[r * k + s];
                let y = &ys[(r * k + s) * e..][..e];
                if s == 0 {
                    o.iter_mut().zip(y).for_each(|(a, v)| *a = v * wgt);
                } else {
                    o.iter_mut().zip(y).for_each(|(a, v)| *a += v * wgt);
                }
            }
        }

        if let Some(sh) = &self.shared {
            let mut s = cx.buffer(n * e);
            sh.mlp.forward(cx, h, n, &mut s);
            if let Some(gm) = &sh.gate {
                let mut gl = cx.buffer(n);
                b.matmul(gm, h, n, &mut gl);
                for (row, &gv) in s.chunks_exact_mut(e).zip(gl.iter()) {
                    let sg = 1.0 / (1.0 + (-gv).exp());
                    row.iter_mut().for_each(|v| *v *= sg);
                }
                cx.recycle(gl);
            }
            b.add(out, &s);
            cx.recycle(s);
        }
    }
}

/// Picks one row's experts (`sel`, best first) and their weights from its router logits.
fn route(cfg: &MoeConfig, logits: &[f32], sel: &mut [usize], wts: &mut [f32]) {
    let probs: Vec<f32> = match cfg.gating {
        Gating::Softmax => softmax(logits),
        Gating::SoftmaxSelected => logits.to_vec(),
    };
    let mut idx: Vec<usize> = (0..probs.len()).collect();
    // descending; equal values keep the lower expert first
    idx.sort_by(|&a, &b| probs[b].total_cmp(&probs[a]).then(a.cmp(&b)));
    for (s, &x) in idx[..sel.len()].iter().enumerate() {
        sel[s] = x;
        wts[s] = probs[x];
    }
    if cfg.gating == Gating::SoftmaxSelected {
        let p = softmax(wts);
        wts.copy_from_slice(&p);
    }
    if cfg.norm_weights {
        let sum = wts.iter().map(|&v| v as f64).sum::<f64>() as f32;
        let sum = sum.max(6.103_515_6e-5);
        wts.iter_mut().for_each(|v| *v /= sum);
    }
    if cfg.weights_scale != 0.0 && cfg.weights_scale != 1.0 {
        wts.iter_mut().for_each(|v| *v *= cfg.weights_scale);
    }
}

/// ggml's softmax: `exp(x - max)` summed in f64, then times `1 / sum` in f32.
fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut p: Vec<f32> = x.iter().map(|&v| (v - max).exp()).collect();
    let inv = (1.0 / p.iter().map(|&v| v as f64).sum::<f64>()) as f32;
    p.iter_mut().for_each(|v| *v *= inv);
    p
}

/// gpt-oss's clamped SwiGLU, in place on `gate`.
fn swiglu_oai(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(limit);
        let y = u.clamp(-limit, limit);
        *g = x / (1.0 + (alpha * -x).exp()) * (y + 1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(gating: Gating, norm: bool, scale: f32) -> MoeConfig {
        MoeConfig { n_expert: 5, n_used: 2, gating, norm_weights: norm, weights_scale: scale, act: ExpertAct::Silu }
    }

    #[test]
    fn routes_top_k_in_descending_order() {
        let logits = [0.1, 2.0, -1.0, 1.5, 2.0];
        let (mut sel, mut w) = ([0; 2], [0f32; 2]);
        route(&cfg(Gating::Softmax, false, 0.0), &logits, &mut sel, &mut w);
        assert_eq!(sel, [1, 4]);
        let p = softmax(&logits);
        assert_eq!(w, [p[1], p[4]]);
        route(&cfg(Gating::Softmax, true, 2.0), &logits, &mut sel, &mut w);
        assert!((w[0] - 1.0).abs() < 1e-6 && (w[1] - 1.0).abs() < 1e-6);
        route(&cfg(Gating::SoftmaxSelected, false, 0.0), &[0.0, 1.0, 3.0, 0.0, 0.0], &mut sel, &mut w);
        assert_eq!(sel, [2, 1]);
        assert!((w[0] + w[1] - 1.0).abs() < 1e-6 && w[0] > w[1]);
    }
}
