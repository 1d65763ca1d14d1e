//! A copy of a layer's cache in the tiled kernel's layout, kept up to date as rows are stored, so
//! an attention call reads its keys instead of converting the whole cache each time (decode would
//! otherwise convert `positions × heads × dims` values per layer per token). An f16 cache is
//! mirrored as its f16 bits (the kernel widens them as it loads: exact, and half the bytes a
//! decode step streams); other cache types as f32 rows read back with `kv::load_row`. Either way
//! the kernel sees the cache's own values, so results are bit-identical to converting on the fly.

use super::kv;
use super::tiled::KP;
use lse_gguf::GgmlType;

/// Mirrored values: f16 bit patterns or f32.
#[derive(Clone, Debug)]
enum Values {
    F16(Vec<u16>),
    F32(Vec<f32>),
}

/// K per head as panels of `KP` keys, each `[dim][key]` (transposed); V per head as rows.
/// Positions are absolute; the capacity is a whole number of panels and grows as rows come.
#[derive(Clone, Debug)]
pub struct TiledMirror {
    kt: Values,
    v: Values,
    /// Positions held (a multiple of `KP`).
    cap: usize,
    n_head_kv: usize,
    dk: usize,
    dv: usize,
    /// Positions it will never be asked to hold more of (the cache's capacity).
    limit: usize,
}

/// A view of a mirror for one attention call.
#[derive(Clone, Copy, Debug)]
pub enum MirrorView<'a> {
    F16 { kt: &'a [u16], v: &'a [u16], cap: usize },
    F32 { kt: &'a [f32], v: &'a [f32], cap: usize },
}

impl MirrorView<'_> {
    /// Positions held.
    pub fn cap(&self) -> usize {
        match *self {
            MirrorView::F16 { cap, .. } | MirrorView::F32 { cap, .. } => cap,
        }
    }
}

/// `old` (per head `old_cap · width` values at the start of the head's block) moved into blocks
/// of `cap · width`.
fn regrow<E: Copy + Default>(old: &[E], hk: usize, old_cap: usize, cap: usize, width: usize) -> Vec<E> {
    let mut out = vec![E::default(); hk * cap * width];
    for h in 0..hk {
        out[h * cap * width..][..old_cap * width].copy_from_slice(&old[h * old_cap * width..][..old_cap * width]);
    }
    out
}

impl TiledMirror {
    /// An empty mirror; it grows (doubling, whole panels) as positions are stored.
    pub fn new(n_head_kv: usize, dk: usize, dv: usize) -> TiledMirror {
        TiledMirror { kt: Values::F32(Vec::new()), v: Values::F32(Vec::new()), cap: 0, n_head_kv, dk, dv, limit: usize::MAX }
    }

    /// The mirror never reserves room past `positions` (rounded up to a panel).
    pub fn limited(self, positions: usize) -> TiledMirror {
        TiledMirror { limit: positions, ..self }
    }

    /// Makes room for `positions`, keeping what is held (the layout depends on the capacity).
    fn reserve(&mut self, positions: usize) {
        if positions <= self.cap {
            return;
        }
        let (hk, dk, dv, old) = (self.n_head_kv, self.dk, self.dv, self.cap);
        // The first reservation takes twice what it is asked: a mirror is made at a session's
        // first decode step, holding its prompt, and would otherwise regrow a few steps later
        // (copying, and faulting in the new pages: ~310 µs a SmolLM2 layer at 528 positions).
        let want = if old == 0 { 2 * positions } else { positions.max(2 * old) };
        let cap = want.max(64).min(self.limit.max(positions)).div_ceil(KP) * KP;
        self.kt = match &self.kt {
            Values::F16(x) => Values::F16(regrow(x, hk, old, cap, dk)),
            Values::F32(x) => Values::F32(regrow(x, hk, old, cap, dk)),
        };
        self.v = match &self.v {
            Values::F16(x) => Values::F16(regrow(x, hk, old, cap, dv)),
            Values::F32(x) => Values::F32(regrow(x, hk, old, cap, dv)),
        };
        self.cap = cap;
    }

    /// Copies positions `pos0 .. pos0 + n` from the cache bytes (`k`, `v`: all positions, rows
    /// of `n_head_kv` heads of `kb` / `vb` bytes) into the mirror. The first call fixes the
    /// stored form from the cache type.
    #[allow(clippy::too_many_arguments)]
    pub fn update(&mut self, ty: GgmlType, k: &[u8], v: &[u8], kb: usize, vb: usize, pos0: usize, n: usize) {
        if self.cap == 0 && ty == GgmlType::F16 {
            (self.kt, self.v) = (Values::F16(Vec::new()), Values::F16(Vec::new()));
        }
        self.reserve(pos0 + n);
        let (hk, dk, dv, cap) = (self.n_head_kv, self.dk, self.dv, self.cap);
        let mut tmp = Vec::new();
        for pos in pos0..pos0 + n {
            for h in 0..hk {
                let src = pos * hk + h;
                let (krow, vrow) = (&k[src * kb..(src + 1) * kb], &v[src * vb..(src + 1) * vb]);
                // K element d of this position sits at kt[panel + d·KP + pos % KP]
                let panel = (h * (cap / KP) + pos / KP) * dk * KP;
                let kcol = panel + pos % KP..panel + dk * KP;
                let vat = (h * cap + pos) * dv;
                match (&mut self.kt, &mut self.v) {
                    (Values::F16(kt), Values::F16(vm)) => {
                        let bits = |b: &[u8]| u16::from_le_bytes([b[0], b[1]]);
                        for (dst, b) in kt[kcol].iter_mut().step_by(KP).zip(krow.chunks_exact(2)) {
                            *dst = bits(b);
                        }
                        for (dst, b) in vm[vat..vat + dv].iter_mut().zip(vrow.chunks_exact(2)) {
                            *dst = bits(b);
                        }
                    }
                    (Values::F32(kt), Values::F32(vm)) => {
                        tmp.resize(dk, 0f32);
                        kv::load_row(ty, krow, &mut tmp);
                        for (dst, x) in kt[kcol].iter_mut().step_by(KP).zip(&tmp) {
                            *dst = *x;
                        }
                        kv::load_row(ty, vrow, &mut vm[vat..vat + dv]);
                    }
                    _ => unreachable!("K and V are mirrored in one form"),
                }
            }
        }
        // The kernel reads V rows up to the end of the last panel. Rows never written there may
        // map the shared zero page, and the write that later replaces it makes the kernel flush
        // the other cores' TLBs: an interrupt to each (decode steps in a 2-vCPU guest spent
        // 60–110 µs in such a store, against 5 µs for a plain first touch). Writing the rest of a
        // panel's rows (zeros, as allocated; masked keys) when its first row is stored avoids it.
        let end = pos0 + n;
        let (panel, pend) = ((end - 1) / KP * KP, end.div_ceil(KP) * KP);
        if pos0 <= panel && end < pend {
            for h in 0..hk {
                let rows = (h * cap + end) * dv..(h * cap + pend) * dv;
                match &mut self.v {
                    Values::F16(vm) => vm[rows].fill(0),
                    Values::F32(vm) => vm[rows].fill(0.0),
                }
            }
        }
    }

    pub fn view(&self) -> MirrorView<'_> {
        match (&self.kt, &self.v) {
            (Values::F16(kt), Values::F16(v)) => MirrorView::F16 { kt, v, cap: self.cap },
            (Values::F32(kt), Values::F32(v)) => MirrorView::F32 { kt, v, cap: self.cap },
            _ => unreachable!("K and V are mirrored in one form"),
        }
    }

    pub fn bytes(&self) -> usize {
        let len = |x: &Values| match x {
            Values::F16(x) => 2 * x.len(),
            Values::F32(x) => 4 * x.len(),
        };
        len(&self.kt) + len(&self.v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Storing a panel's first rows writes the rest of its V rows too (zeros), so no attention
    /// read lands on a never-written page: here the rows a truncated session left behind.
    #[test]
    fn panel_rest_of_v_written_with_first_row() {
        let (hk, d) = (2usize, 16usize);
        let ones: Vec<u8> = (0..40 * hk * d).flat_map(|_| crate::fp::f32_to_f16(1.0).to_le_bytes()).collect();
        let mut m = TiledMirror::new(hk, d, d);
        m.update(GgmlType::F16, &ones, &ones, d * 2, d * 2, 0, 40);
        // the session is cut back to 16 positions and stores position 16 (panel 1's first) again
        m.update(GgmlType::F16, &ones, &ones, d * 2, d * 2, 16, 1);
        let MirrorView::F16 { v, cap, .. } = m.view() else { panic!("f16 cache, f16 mirror") };
        for h in 0..hk {
            let row = |pos: usize| &v[(h * cap + pos) * d..(h * cap + pos + 1) * d];
            assert!(row(16).iter().all(|&x| x == crate::fp::f32_to_f16(1.0)), "the stored row");
            assert!((17..32).all(|p| row(p).iter().all(|&x| x == 0)), "the rest of panel 1 is written");
            assert!(row(32).iter().all(|&x| x != 0), "the next panel is not touched");
        }
    }
}
