//! The parts every model has around its layer stack: token embeddings, the final norm and the
//! LM head (`output.weight`, tied to `token_embd.weight` when absent), plus the logit scale and final
//! soft-capping.

use crate::arch::{load_architecture, Architecture};
use crate::{EngineError, Matrix, Weights};

pub struct Model {
    pub w: Weights,
    pub arch: Box<dyn Architecture>,
    pub token_embd: Matrix,
    pub output_norm: Vec<f32>,
    pub output: Matrix,
    pub final_softcap: Option<f32>,
    /// Logits x (1 / this) before soft-capping (granite), from `Architecture::logit_scale`.
    pub logit_scale: Option<f32>,
    pub n_vocab: usize,
    pub n_embd: usize,
}

impl Model {
    pub fn load(w: Weights) -> Result<Model, EngineError> {
        // a block beyond block_count would be left out silently (llama.cpp refuses such a file:
        // it counts the tensors it created against the file's)
        if let Some(t) = w.tensor_infos().find(|t| block_of(&t.name).is_some_and(|b| b >= w.hp.n_layer)) {
            return Err(EngineError::Metadata(format!("tensor '{}' is beyond {}.block_count {}", t.name, w.hp.arch, w.hp.n_layer)));
        }
        let e = w.hp.n_embd;
        let emb = w.tensor_info("token_embd.weight").ok_or_else(|| EngineError::MissingTensor("token_embd.weight".into()))?;
        if emb.dims.len() < 2 || emb.dims[0] as usize != e {
            return Err(EngineError::ShapeMismatch { name: "token_embd.weight".into(), got: emb.dims.clone(), want: vec![e as u64, 0] });
        }
        let n_vocab = emb.dims[1] as usize;
        let token_embd = w.matrix("token_embd.weight", e, n_vocab)?;
        let output = match w.opt_matrix("output.weight", e, n_vocab)? {
            Some(m) => m,
            None => token_embd.clone(),
        };
        let output_norm = w.vector("output_norm.weight", e)?;
        let arch = load_architecture(&w)?;
        let (logit_scale, final_softcap) = (arch.logit_scale(), arch.final_softcap());
        Ok(Model { w, arch, token_embd, output_norm, output, final_softcap, logit_scale, n_vocab, n_embd: e })
    }
}

/// The block number of a `blk.N.*` tensor.
fn block_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")?.split('.').next()?.parse().ok()
}
