//! Weights repacked once (at bind time) for an AVX-512 VNNI register-tiled GEMM.
//!
//! The row kernels (`simd::*`) dot one weight row with up to 8 activation rows and reduce every
//! 32-element block horizontally. Here the roles are swapped: 16 weight rows sit side by side in
//! one 512-bit register (4 consecutive bytes of each row per 32-bit lane), 4 activation bytes are
//! broadcast to all lanes, and one `vpdpbusd` adds 64 products into 16 column sums. No horizontal
//! reduction is left; a micro-tile of up to [`PMR`] activation rows × 16 weight rows keeps its
//! sums in registers and writes 16 contiguous outputs per activation row.
//!
//! Supported: the 32-element block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (llama.cpp's Q8_0 /
//! Q8_1 activations, the same integer block sums, so the same values up to f32 summation order).
//!
//! Packed layout, per group of 16 weight rows (the last group padded with zero rows), per block
//! of 32 elements: the quants as unsigned bytes (`u = q + 2^SH` for the Q8_0 family, the stored
//! unsigned quant for the Q8_1 family), then 16 f32 block scales `d`, then 16 f32 mins `m`
//! (Q8_1 family). 4-bit formats keep two quants per byte: byte `t·64 + 4r + c` holds element
//! `4t + c` of row `r` in its low nibble and element `16 + 4t + c` in its high nibble (t < 4);
//! 5- and 8-bit formats use one byte per quant: byte `t·64 + 4r + c` = element `4t + c` (t < 8).

use lse_gguf::GgmlType;

/// Weight rows per packed group (lanes of one 512-bit vector of i32 sums).
pub const PNR: usize = 16;
/// Activation rows per micro-tile at most.
pub const PMR: usize = 8;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct A64([u8; 64]);

/// A weight matrix in the packed layout (see the module docs).
pub struct PackedMatrix {
    t: GgmlType,
    n: usize,
    k: usize,
    nib: bool,
    min: bool,
    sh: i32,
    /// Bytes per block of one group (quants, d, m).
    block_bytes: usize,
    data: Vec<A64>,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedMatrix({} [{} x {}])", self.t.name(), self.n, self.k)
    }
}

/// (4-bit storage, Q8_1 family, SH) of a packable type.
fn format(t: GgmlType) -> Option<(bool, bool, i32)> {
    let only = std::env::var("LSE_PACKED_ONLY").ok();
    if let Some(o) = only {
        if o != t.name() { return None; }
    }
    Some(match t {
        GgmlType::Q4_0 => (true, false, 3),
        GgmlType::Q4_1 => (true, true, 0),
        GgmlType::Q5_0 => (false, false, 4),
        GgmlType::Q5_1 => (false, true, 0),
        GgmlType::Q8_0 => (false, false, 7),
        _ => return None,
    })
}

/// True when this CPU runs the packed kernels (AVX-512 F/BW/VNNI and the SIMD level not capped
/// below AVX-512 by `LSE_SIMD`); `LSE_PACKED=0` turns them off (for A/B comparisons).
pub fn packed_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *ON.get_or_init(|| {
            crate::simd::level() == crate::simd::Level::Avx512
                && std::env::var("LSE_PACKED").map_or(true, |v| v != "0")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// True when weights of type `t` can be packed (and the CPU runs the packed kernels).
pub fn packable(t: GgmlType) -> bool {
    format(t).is_some() && packed_available()
}

/// Decodes one 32-element block into (d, m, unsigned quants).
fn decode_block(t: GgmlType, b: &[u8], u: &mut [u8; 32]) -> (f32, f32) {
    let h = |o: usize| crate::fp::f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]));
    match t {
        GgmlType::Q4_0 | GgmlType::Q4_1 => {
            let qo = if t == GgmlType::Q4_0 { 2 } else { 4 };
            for i in 0..16 {
                u[i] = b[qo + i] & 0x0f;
                u[i + 16] = b[qo + i] >> 4;
            }
            (h(0), if t == GgmlType::Q4_1 { h(2) } else { 0.0 })
        }
        GgmlType::Q5_0 | GgmlType::Q5_1 => {
            let (ho, qo) = if t == GgmlType::Q5_0 { (2, 6) } else { (4, 8) };
            let qh = u32::from_le_bytes([b[ho], b[ho + 1], b[ho + 2], b[ho + 3]]);
            for i in 0..16 {
                u[i] = (b[qo + i] & 0x0f) | ((((qh >> i) & 1) as u8) << 4);
                u[i + 16] = (b[qo + i] >> 4) | ((((qh >> (i + 16)) & 1) as u8) << 4);
            }
            (h(0), if t == GgmlType::Q5_1 { h(2) } else { 0.0 })
        }
        GgmlType::Q8_0 => {
            for i in 0..32 {
                u[i] = b[2 + i] ^ 0x80;
            }
            (h(0), 0.0)
        }
        _ => unreachable!(),
    }
}

impl PackedMatrix {
    /// Packs `n` rows of `k` elements of type `t` (row-major ggml bytes). `None` when the type is
    /// not packable here ([`packable`]). Panics on short buffers or a `k` that is not a multiple
    /// of 32. Packing runs on `pool`.
    pub fn new(
        pool: &crate::ThreadPool,
        t: GgmlType,
        w: &[u8],
        n: usize,
        k: usize,
    ) -> Option<PackedMatrix> {
        if !packable(t) {
            return None;
        }
        let (nib, min, sh) = format(t)?;
        let rb = t
            .row_bytes(k)
            .unwrap_or_else(|| panic!("pack: k = {k} is not a multiple of 32"));
        assert!(w.len() >= n * rb, "pack: weight buffer too short");
        let qb = if nib { 256 } else { 512 };
        let block_bytes = qb + 128;
        let nb = k / 32;
        let ng = n.div_ceil(PNR);
        let group_bytes = nb * block_bytes;
        let mut data = vec![A64([0; 64]); (ng * group_bytes).div_ceil(64)];
        let bs = t.type_size();
        let base = crate::matmul::SendPtr(data.as_mut_ptr() as *mut u8);
        let fill = |g: usize| {
            // SAFETY: group g owns bytes g·group_bytes .. (g+1)·group_bytes of `data`.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(base.get().add(g * group_bytes), group_bytes) };
            let mut u = [0u8; 32];
            for r in 0..PNR.min(n - g * PNR) {
                let row = &w[(g * PNR + r) * rb..(g * PNR + r + 1) * rb];
                for b in 0..nb {
                    let (d, m) = decode_block(t, &row[b * bs..(b + 1) * bs], &mut u);
                    let blk = &mut dst[b * block_bytes..(b + 1) * block_bytes];
                    if nib {
                        for tt in 0..4 {
                            for c in 0..4 {
                                blk[tt * 64 + 4 * r + c] = u[4 * tt + c] | (u[16 + 4 * tt + c] << 4);
                            }
                        }
                    } else {
                        for tt in 0..8 {
                            blk[tt * 64 + 4 * r..tt * 64 + 4 * r + 4]
                                .copy_from_slice(&u[4 * tt..4 * tt + 4]);
                        }
                    }
                    blk[qb + 4 * r..qb + 4 * r + 4].copy_from_slice(&d.to_le_bytes());
                    blk[qb + 64 + 4 * r..qb + 64 + 4 * r + 4].copy_from_slice(&m.to_le_bytes());
                }
            }
        };
        if ng > 1 && pool.threads() > 1 {
            pool.run(ng, &fill);
        } else {
            (0..ng).for_each(fill);
        }
        Some(PackedMatrix {
            t,
            n,
            k,
            nib,
            min,
            sh,
            block_bytes,
            data,
        })
    }

    pub fn ggml_type(&self) -> GgmlType {
        self.t
    }
    pub fn n(&self) -> usize {
        self.n
    }
    pub fn k(&self) -> usize {
        self.k
    }
    /// Bytes of packed data.
    pub fn size_bytes(&self) -> usize {
        self.data.len() * 64
    }
    pub(crate) fn group_bytes(&self) -> usize {
        self.k / 32 * self.block_bytes
    }
    pub(crate) fn min(&self) -> bool {
        self.min
    }
    pub(crate) fn ptr(&self) -> *const u8 {
        self.data.as_ptr() as *const u8
    }

    /// The micro-tile: `nx` (≤ PMR) activation rows at `x` (Split32 rows, stride `xs`) against
    /// group `g`; writes `ncols` (≤ 16) outputs of each row to `y + j·ldy`.
    ///
    /// # Safety
    /// `x` must hold `nx` Split32 rows of this matrix's `k`, `y` the outputs, the CPU must run
    /// the packed kernels.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn tile(
        &self,
        g: usize,
        x: *const u8,
        xs: usize,
        nx: usize,
        y: *mut f32,
        ldy: usize,
        ncols: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            let wg = self.ptr().add(g * self.group_bytes());
            let a = Args {
                nb: self.k / 32,
                k: self.k,
                sh: self.sh,
                wg,
                bb: self.block_bytes,
                x,
                xs,
                y,
                ldy,
                ncols,
            };
            macro_rules! go {
                ($nib:literal, $min:literal) => {
                    match nx {
                        1 => avx512::tile::<$nib, $min, 1>(&a),
                        2 => avx512::tile::<$nib, $min, 2>(&a),
                        3 => avx512::tile::<$nib, $min, 3>(&a),
                        4 => avx512::tile::<$nib, $min, 4>(&a),
                        5 => avx512::tile::<$nib, $min, 5>(&a),
                        6 => avx512::tile::<$nib, $min, 6>(&a),
                        7 => avx512::tile::<$nib, $min, 7>(&a),
                        _ => avx512::tile::<$nib, $min, 8>(&a),
                    }
                };
            }
            match (self.nib, self.min) {
                (true, true) => go!(true, true),
                (true, false) => go!(true, false),
                (false, true) => go!(false, true),
                (false, false) => go!(false, false),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (g, x, xs, nx, y, ldy, ncols);
            unreachable!("packed kernels are x86_64 only");
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) struct Args {
    nb: usize,
    k: usize,
    sh: i32,
    wg: *const u8,
    bb: usize,
    x: *const u8,
    xs: usize,
    y: *mut f32,
    ldy: usize,
    ncols: usize,
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Args;
    use core::arch::x86_64::*;

    #[inline(always)]
    unsafe fn bx(p: *const u8) -> __m512i {
        _mm512_set1_epi32((p as *const i32).read_unaligned())
    }

    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub(super) unsafe fn tile<const NIB: bool, const MIN: bool, const MR: usize>(a: &Args) {
        let (nb, k, xs) = (a.nb, a.k, a.xs);
        let qb = if NIB { 256 } else { 512 };
        let m0f = _mm512_set1_epi8(0x0f);
        let mut facc = [_mm512_setzero_ps(); MR];
        for b in 0..nb {
            let wb = a.wg.add(b * a.bb);
            let xb = a.x.add(32 * b);
            let mut ia = [_mm512_setzero_si512(); MR];
            if NIB {
                for t in 0..4 {
                    let v = _mm512_loadu_si512(wb.add(64 * t) as *const _);
                    let lo = _mm512_and_si512(v, m0f);
                    let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m0f);
                    for j in 0..MR {
                        ia[j] = _mm512_dpbusd_epi32(ia[j], lo, bx(xb.add(j * xs + 4 * t)));
                    }
                    for j in 0..MR {
                        ia[j] = _mm512_dpbusd_epi32(ia[j], hi, bx(xb.add(j * xs + 16 + 4 * t)));
                    }
                }
            } else {
                for t in 0..8 {
                    let v = _mm512_loadu_si512(wb.add(64 * t) as *const _);
                    for j in 0..MR {
                        ia[j] = _mm512_dpbusd_epi32(ia[j], v, bx(xb.add(j * xs + 4 * t)));
                    }
                }
            }
            let dw = _mm512_loadu_ps(wb.add(qb) as *const f32);
            let so = k + 4 * nb + 4 * b;
            if MIN {
                let mw = _mm512_loadu_ps(wb.add(qb + 64) as *const f32);
                for j in 0..MR {
                    let px = a.x.add(j * xs);
                    let dx = _mm512_set1_ps((px.add(k + 4 * b) as *const f32).read_unaligned());
                    let sx = _mm512_set1_ps((px.add(so) as *const f32).read_unaligned());
                    facc[j] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[j]), _mm512_mul_ps(dw, dx), facc[j]);
                    facc[j] = _mm512_fmadd_ps(mw, sx, facc[j]);
                }
            } else {
                for j in 0..MR {
                    let px = a.x.add(j * xs);
                    let dx = _mm512_set1_ps((px.add(k + 4 * b) as *const f32).read_unaligned());
                    let corr = (px.add(so) as *const i32).read_unaligned() << a.sh;
                    let iv = _mm512_sub_epi32(ia[j], _mm512_set1_epi32(corr));
                    facc[j] =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(iv), _mm512_mul_ps(dw, dx), facc[j]);
                }
            }
        }
        if a.ncols >= 16 {
            for j in 0..MR {
                _mm512_storeu_ps(a.y.add(j * a.ldy), facc[j]);
            }
        } else {
            let mask: __mmask16 = ((1u32 << a.ncols) - 1) as u16;
            for j in 0..MR {
                _mm512_mask_storeu_ps(a.y.add(j * a.ldy), mask, facc[j]);
            }
        }
    }
}
