//! The KV cache of one attention layer: up to `capacity` positions, each `n_head_kv` K rows of
//! `head_dim_k` and V rows of `head_dim_v`, stored in the cache dtype. K and V pass through that
//! dtype before attention reads them (f16 by default, as llama.cpp). Memory grows with the
//! positions stored (doubling), so many sessions of a large capacity cost what they hold.

use crate::EngineError;
use lse_gguf::GgmlType;
use lse_kernels::attention::{kv, KvView};

#[derive(Clone)]
pub struct LayerKv {
    pub ty: GgmlType,
    pub capacity: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    kb: usize,
    vb: usize,
    k: Vec<u8>,
    v: Vec<u8>,
    /// f32 copy in the tiled attention kernel's layout (made when that kernel runs).
    #[cfg(target_arch = "x86_64")]
    mirror: Option<lse_kernels::attention::TiledMirror>,
}

impl LayerKv {
    pub fn new(ty: GgmlType, capacity: usize, n_head_kv: usize, head_dim_k: usize, head_dim_v: usize) -> Result<LayerKv, EngineError> {
        let bad = |d: usize| EngineError::InvalidOption(format!("--kv-cache-dtype {} cannot store heads of {d} values (q8_0 needs a multiple of 32)", ty.name()));
        let kb = kv::kv_row_bytes(ty, head_dim_k).ok_or_else(|| bad(head_dim_k))?;
        let vb = kv::kv_row_bytes(ty, head_dim_v).ok_or_else(|| bad(head_dim_v))?;
        Ok(LayerKv {
            ty,
            capacity,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            kb,
            vb,
            k: Vec::new(),
            v: Vec::new(),
            #[cfg(target_arch = "x86_64")]
            mirror: None,
        })
    }

    /// Writes `n` positions starting at `pos0`: `k` rows of `n_head_kv × head_dim_k`, `v` likewise.
    pub fn store(&mut self, pos0: usize, n: usize, k: &[f32], v: &[f32]) -> Result<(), EngineError> {
        if pos0 + n > self.capacity {
            return Err(EngineError::WindowTooLong { tokens: pos0 + n, capacity: self.capacity });
        }
        let (hk, dk, dv) = (self.n_head_kv, self.head_dim_k, self.head_dim_v);
        if k.len() != n * hk * dk || v.len() != n * hk * dv {
            return Err(EngineError::Kernel("kv store: row sizes do not match the cache".into()));
        }
        let need = pos0 + n;
        if self.k.len() < need * hk * self.kb {
            let positions = need.max(2 * self.k.len() / (hk * self.kb)).max(64).min(self.capacity);
            self.k.resize(positions * hk * self.kb, 0);
            self.v.resize(positions * hk * self.vb, 0);
        }
        for r in 0..n * hk {
            let slot = pos0 * hk + r;
            kv::store_row(self.ty, &k[r * dk..(r + 1) * dk], &mut self.k[slot * self.kb..(slot + 1) * self.kb]);
            kv::store_row(self.ty, &v[r * dv..(r + 1) * dv], &mut self.v[slot * self.vb..(slot + 1) * self.vb]);
        }
        Ok(())
    }

    /// Bytes one position costs (K and V rows of every head, in the cache dtype).
    pub fn bytes_per_position(&self) -> usize {
        self.n_head_kv * (self.kb + self.vb)
    }

    /// Bytes held by K and V (and their f32 copy, once made).
    pub fn bytes(&self) -> usize {
        #[cfg(target_arch = "x86_64")]
        let mirror = self.mirror.as_ref().map_or(0, |m| m.bytes());
        #[cfg(not(target_arch = "x86_64"))]
        let mirror = 0;
        self.k.len() + self.v.len() + mirror
    }

    /// Whether the f32 copy for the tiled attention kernel exists.
    #[cfg(target_arch = "x86_64")]
    pub fn has_mirror(&self) -> bool {
        self.mirror.is_some()
    }

    /// Keeps the f32 copy that the tiled attention kernel reads up to date for positions
    /// `pos0 .. pos0 + n` (made, with every position before, on first use).
    #[cfg(target_arch = "x86_64")]
    pub fn update_mirror(&mut self, pos0: usize, n: usize) {
        let (from, m) = match &mut self.mirror {
            Some(m) => (pos0, m),
            None => (0, self.mirror.insert(lse_kernels::attention::TiledMirror::new(self.n_head_kv, self.head_dim_k, self.head_dim_v).limited(self.capacity))),
        };
        m.update(self.ty, &self.k, &self.v, self.kb, self.vb, from, pos0 + n - from);
    }

    /// The cache as the attention kernels read it.
    pub fn view(&self) -> KvView<'_> {
        KvView {
            ty: self.ty,
            k: &self.k,
            v: &self.v,
            n_head_kv: self.n_head_kv,
            head_dim_k: self.head_dim_k,
            head_dim_v: self.head_dim_v,
            #[cfg(target_arch = "x86_64")]
            mirror: self.mirror.as_ref().map(|m| m.view()),
        }
    }
}
