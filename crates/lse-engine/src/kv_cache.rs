//! The KV cache of one attention layer: up to `capacity` positions, each `n_head_kv` K rows of
//! `head_dim_k` and V rows of `head_dim_v`, stored in the cache dtype. K and V pass through that
//! dtype before attention reads them (f16 by default, as llama.cpp). Memory grows with the
//! positions stored (room for the capacity is reserved, but only written pages are backed), so
//! many sessions of a large capacity cost what they hold.

use crate::EngineError;
use lse_gguf::GgmlType;
use lse_kernels::attention::{kv, KvView};

/// Positions the cache's length grows by.
const GROW: usize = 64;

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
        self.room_for(pos0 + n);
        for r in 0..n * hk {
            let slot = pos0 * hk + r;
            kv::store_row(self.ty, &k[r * dk..(r + 1) * dk], &mut self.k[slot * self.kb..(slot + 1) * self.kb]);
            kv::store_row(self.ty, &v[r * dv..(r + 1) * dv], &mut self.v[slot * self.vb..(slot + 1) * self.vb]);
        }
        Ok(())
    }

    /// Makes the stored rows hold at least `need` positions. Room for the capacity is reserved
    /// once (address space: a page is only backed once written) and the length grows in steps of
    /// `GROW` positions, so no store copies the cache. Doubling did, and zero-filled the new half:
    /// 12 ms at a SmolLM2 session's 513th position (page faults), against a 4 ms decode step.
    fn room_for(&mut self, need: usize) {
        let hk = self.n_head_kv;
        if self.k.len() >= need * hk * self.kb {
            return;
        }
        let positions = need.next_multiple_of(GROW).min(self.capacity);
        if self.k.capacity() < positions * hk * self.kb {
            self.reserve_capacity();
        }
        self.k.resize(positions * hk * self.kb, 0);
        self.v.resize(positions * hk * self.vb, 0);
    }

    /// Reserves room for the capacity's rows (where the address space is refused, under strict
    /// overcommit, the vectors grow as they can).
    fn reserve_capacity(&mut self) {
        let hk = self.n_head_kv;
        let _ = self.k.try_reserve_exact((self.capacity * hk * self.kb).saturating_sub(self.k.len()));
        let _ = self.v.try_reserve_exact((self.capacity * hk * self.vb).saturating_sub(self.v.len()));
    }

    /// The stored K and V bytes of the first `n` positions (a session file's rows).
    pub(crate) fn held(&self, n: usize) -> (&[u8], &[u8]) {
        let (kb, vb) = self.held_bytes(n);
        (&self.k[..kb], &self.v[..vb])
    }

    /// How many bytes [`LayerKv::held`] gives for `n` positions.
    pub(crate) fn held_bytes(&self, n: usize) -> (usize, usize) {
        (n * self.n_head_kv * self.kb, n * self.n_head_kv * self.vb)
    }

    /// Takes `k` and `v`, bytes as [`LayerKv::held`] gives them, as the cache's first positions
    /// (an empty cache: a session read from a file); the f32 copy is made again on first use.
    pub(crate) fn put_held(&mut self, k: &[u8], v: &[u8]) -> Result<(), EngineError> {
        let n = k.len() / (self.n_head_kv * self.kb);
        if n > self.capacity || k.len() != n * self.n_head_kv * self.kb || v.len() != n * self.n_head_kv * self.vb {
            return Err(EngineError::Kernel("kv rows: sizes do not match the cache".into()));
        }
        self.k.clear();
        self.v.clear();
        // the capacity's room first, so that the next store grows in place
        self.reserve_capacity();
        self.k.extend_from_slice(k);
        self.v.extend_from_slice(v);
        #[cfg(target_arch = "x86_64")]
        {
            self.mirror = None;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Growing past what is held keeps the stored rows where they are (no copy of the cache) and
    /// holds whole steps of `GROW` positions, up to the capacity.
    #[test]
    fn growth_moves_nothing() {
        let (hk, d) = (2usize, 32usize);
        let mut kv = LayerKv::new(GgmlType::F16, 1000, hk, d, d).unwrap();
        let rows = |n: usize, x: f32| vec![x; n * hk * d];
        kv.store(0, 512, &rows(512, 1.0), &rows(512, 2.0)).unwrap();
        let (k0, v0) = (kv.k.as_ptr(), kv.v.as_ptr());
        assert_eq!(kv.bytes(), 512 * kv.bytes_per_position());
        kv.store(512, 1, &rows(1, 3.0), &rows(1, 4.0)).unwrap();
        assert_eq!((kv.k.as_ptr(), kv.v.as_ptr()), (k0, v0), "the cache was moved");
        assert_eq!(kv.bytes(), 576 * kv.bytes_per_position());
        let half = |b: &[u8], pos: usize| lse_kernels::f16_to_f32(u16::from_le_bytes([b[pos * hk * 2 * d], b[pos * hk * 2 * d + 1]]));
        assert_eq!((half(&kv.k, 511), half(&kv.k, 512), half(&kv.v, 512)), (1.0, 3.0, 4.0));
        kv.store(513, 487, &rows(487, 5.0), &rows(487, 6.0)).unwrap();
        assert_eq!(kv.bytes(), 1000 * kv.bytes_per_position(), "held up to the capacity, not past it");
        assert!(kv.store(1000, 1, &rows(1, 0.0), &rows(1, 0.0)).is_err());
    }

    /// Rows taken back from a file keep their place when the next store grows the cache.
    #[test]
    fn held_rows_put_back_grow_in_place() {
        let (hk, d) = (2usize, 32usize);
        let rows = |n: usize, x: f32| vec![x; n * hk * d];
        let mut from = LayerKv::new(GgmlType::F16, 1000, hk, d, d).unwrap();
        from.store(0, 100, &rows(100, 1.0), &rows(100, 2.0)).unwrap();
        let (k, v) = from.held(100);
        let mut kv = LayerKv::new(GgmlType::F16, 1000, hk, d, d).unwrap();
        kv.put_held(k, v).unwrap();
        let (k0, v0) = (kv.k.as_ptr(), kv.v.as_ptr());
        kv.store(100, 1, &rows(1, 3.0), &rows(1, 4.0)).unwrap();
        assert_eq!((kv.k.as_ptr(), kv.v.as_ptr()), (k0, v0), "the cache was moved");
        assert_eq!(kv.held(100), from.held(100));
    }
}
