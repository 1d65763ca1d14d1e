//! An f32 copy of a layer's cache in the tiled kernel's layout, kept up to date as rows are
//! stored, so an attention call reads its keys instead of converting the whole cache each time
//! (decode would otherwise convert `positions × heads × dims` values per layer per token).
//! Values are the cache's own rows read back (`kv::load_row`), so results are bit-identical to
//! converting on the fly.

use super::kv;
use super::tiled::KP;
use lse_gguf::GgmlType;

/// K per head as panels of `KP` keys, each `[dim][key]` (transposed); V per head as rows.
/// Positions are absolute; the capacity is a whole number of panels and grows as rows come.
#[derive(Clone, Debug, Default)]
pub struct TiledMirror {
    pub kt: Vec<f32>,
    pub v: Vec<f32>,
    /// Positions held (a multiple of `KP`).
    pub cap: usize,
    n_head_kv: usize,
    dk: usize,
    dv: usize,
}

/// A view of a mirror for one attention call.
#[derive(Clone, Copy, Debug)]
pub struct MirrorView<'a> {
    pub kt: &'a [f32],
    pub v: &'a [f32],
    pub cap: usize,
}

impl TiledMirror {
    /// An empty mirror; it grows (doubling, whole panels) as positions are stored.
    pub fn new(n_head_kv: usize, dk: usize, dv: usize) -> TiledMirror {
        TiledMirror { kt: Vec::new(), v: Vec::new(), cap: 0, n_head_kv, dk, dv }
    }

    /// Makes room for `positions`, keeping what is held (the layout depends on the capacity).
    fn reserve(&mut self, positions: usize) {
        if positions <= self.cap {
            return;
        }
        let (hk, dk, dv) = (self.n_head_kv, self.dk, self.dv);
        let cap = positions.max(2 * self.cap).max(64).div_ceil(KP) * KP;
        let mut kt = vec![0f32; hk * cap * dk];
        let mut v = vec![0f32; hk * cap * dv];
        for h in 0..hk {
            // per head: the panels (dk x KP each) and the V rows, both at the start of its block
            kt[h * cap * dk..][..self.cap * dk].copy_from_slice(&self.kt[h * self.cap * dk..][..self.cap * dk]);
            v[h * cap * dv..][..self.cap * dv].copy_from_slice(&self.v[h * self.cap * dv..][..self.cap * dv]);
        }
        (self.kt, self.v, self.cap) = (kt, v, cap);
    }

    /// Copies positions `pos0 .. pos0 + n` from the cache bytes (`k`, `v`: all positions, rows
    /// of `n_head_kv` heads of `kb` / `vb` bytes) into the mirror.
    pub fn update(&mut self, ty: GgmlType, k: &[u8], v: &[u8], kb: usize, vb: usize, pos0: usize, n: usize) {
        self.reserve(pos0 + n);
        let (hk, dk, dv) = (self.n_head_kv, self.dk, self.dv);
        let mut tmp = vec![0f32; dk];
        for pos in pos0..pos0 + n {
            for h in 0..hk {
                let src = pos * hk + h;
                kv::load_row(ty, &k[src * kb..(src + 1) * kb], &mut tmp);
                let panel = (h * (self.cap / KP) + pos / KP) * dk * KP;
                for (d, &x) in tmp.iter().enumerate() {
                    self.kt[panel + d * KP + pos % KP] = x;
                }
                let vd = &mut self.v[(h * self.cap + pos) * dv..(h * self.cap + pos + 1) * dv];
                kv::load_row(ty, &v[src * vb..(src + 1) * vb], vd);
            }
        }
    }

    pub fn view(&self) -> MirrorView<'_> {
        MirrorView { kt: &self.kt, v: &self.v, cap: self.cap }
    }

    pub fn bytes(&self) -> usize {
        (self.kt.len() + self.v.len()) * 4
    }
}
