//! The gated feed-forward block: `down(act(gate(h)) * up(h))`.

use crate::ops::act::Act;
use crate::{EngineError, ForwardCtx, Matrix, Weights};

pub struct Mlp {
    pub gate: Matrix,
    pub up: Matrix,
    pub down: Matrix,
    pub act: Act,
}

impl Mlp {
    /// Binds `blk.{il}.ffn_{gate,up,down}`; the hidden width comes from `ffn_up`'s shape.
    pub fn load(w: &Weights, il: usize, n_embd: usize, act: Act) -> Result<Mlp, EngineError> {
        let name = format!("blk.{il}.ffn_up.weight");
        let n_ff = match w.tensor_info(&name) {
            Some(t) if t.dims.len() >= 2 => t.dims[1] as usize,
            Some(t) => return Err(EngineError::ShapeMismatch { name, got: t.dims.clone(), want: vec![n_embd as u64, 0] }),
            None => return Err(EngineError::MissingTensor(name)),
        };
        Ok(Mlp {
            gate: w.matrix(&format!("blk.{il}.ffn_gate.weight"), n_embd, n_ff)?,
            up: w.matrix(&name, n_embd, n_ff)?,
            down: w.matrix(&format!("blk.{il}.ffn_down.weight"), n_ff, n_embd)?,
            act,
        })
    }

    /// Binds phi3's fused `blk.{il}.ffn_up` (`2 n_ff` rows: gate rows first, then up) and `ffn_down`.
    pub fn load_fused_up(w: &Weights, il: usize, n_embd: usize, act: Act) -> Result<Mlp, EngineError> {
        let name = format!("blk.{il}.ffn_up.weight");
        let down = w.tensor_info(&format!("blk.{il}.ffn_down.weight")).ok_or_else(|| EngineError::MissingTensor(format!("blk.{il}.ffn_down.weight")))?;
        let n_ff = down.dims[0] as usize;
        let fused = w.matrix(&name, n_embd, 2 * n_ff)?;
        let part = |r0| fused.rows(r0, n_ff).ok_or_else(|| EngineError::Metadata(format!("{name}: rows out of range")));
        Ok(Mlp { gate: part(0)?, up: part(n_ff)?, down: w.matrix(&format!("blk.{il}.ffn_down.weight"), n_ff, n_embd)?, act })
    }

    /// `out` (n × n_embd) = the block applied to the normed rows `h` (n × n_embd).
    pub fn forward(&self, cx: &ForwardCtx, h: &[f32], n: usize, out: &mut [f32]) {
        let b = cx.backend;
        let mut g = cx.buffer_for_overwrite(n * self.gate.n);
        let mut u = cx.buffer_for_overwrite(n * self.up.n);
        b.matmul_many(&[&self.gate, &self.up], h, n, &mut [&mut g, &mut u]);
        b.glu(self.act, &mut g, &u);
        b.matmul(&self.down, &g, n, out);
        cx.recycle(g);
        cx.recycle(u);
    }
}
