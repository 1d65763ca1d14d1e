//! Weights repacked once (at bind time) for a register-tiled int8 GEMM (AVX-512 VNNI in
//! `packed/avx512.rs`, AVX2 in `packed/avx2.rs`; both give bit-identical results).
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
//! of 32 elements: the quants as unsigned values (`u = q + 2^SH` for the Q8_0 family, the stored
//! unsigned quant for the Q8_1 family; the AVX2 tile reads Q8_0 as the file's signed `q`), then 16 block scales `d`, then 16 mins `m` (Q8_1 family
//! only; Q8_0-family blocks end after `d`), as f16: the file's own values. The k-quants keep
//! their scales much as the file does, so a decode step streams about the file's bytes: each
//! run of 8 blocks (one super-block) starts with a header of 16 f32 `d` (and, Q4_K, 16 `−dmin`),
//! and a block's scales are 16 bytes of 6-bit `sc` (Q4_K; then 16 of `m`) or two times 16 signed
//! `sc` (Q6_K's 16-element halves); a tile multiplies `d·sc` itself, exactly the f32 product
//! (at most 17 significant bits), so the values are those of an f32 `d·sc` per block. Q8_0 keeps one byte per quant: byte
//! `t·64 + 4r + c` = element `4t + c` of row `r` (t < 8). Every other format keeps the low 4 bits
//! of two quants per byte: byte `t·64 + 4r + c` holds element `4t + c` in its low nibble and
//! element `16 + 4t + c` in its high nibble (t < 4). The bits above the nibble (`HB` = 1 for
//! Q5_0/Q5_1, 2 for Q6_K) follow in `HB` 64-byte planes: number the eight 64-byte chunks of
//! nibbles s = t (low) and s = 4 + t (high); chunk s's high bits at byte `4r + c` sit at bit
//! `(s·HB) % 8` of plane `(s·HB) / 8`, byte `4r + c`. So a 5- or 6-bit quant streams 5 or 6 bits,
//! and a tile rebuilds each chunk with a shift, an and and an or.

#![allow(clippy::needless_range_loop)] // register tiles index several parallel arrays

use crate::pages::{HugeArena, Pages};
use lse_gguf::GgmlType;
use std::sync::Arc;

/// Weight rows per packed group (lanes of one 512-bit vector of i32 sums).
pub const PNR: usize = 16;
/// Activation rows per micro-tile at most.
pub const PMR: usize = 8;
/// Activation rows per pass of the VNNI tile over two groups of bytes (12 integer and 12 f32
/// sums in registers).
const PAIR_ROWS: usize = 6;
/// Activation rows one tile call takes where a group's quants are rebuilt as bytes once per call
/// (the nibble formats; see [`PackedMatrix::rows_per_tile`]).
const UNPACK_ROWS: usize = 64;
/// Activation rows a prefill's tile call takes where it rebuilds a nibble group as bytes, each
/// rebuild serving twice [`UNPACK_ROWS`]' passes (VNNI packed bench +3–7 % on the nibble formats;
/// 8-chunk prefills alternated: SmolLM2 2.58 → 2.51 s, Gemma-3 3.49 → 3.35, Qwen2.5-Coder 6.96 →
/// 6.57; AVX2 the same within 3 %; 256 rows measured no better).
const PREFILL_UNPACK_ROWS: usize = 128;
/// Passes over a group of 4- or 5-bit nibbles that rebuild the quants in registers before a tile call
/// rebuilds them as bytes once instead (see [`PackedMatrix::unpack_above`]).
const NIBBLE_PASSES_IN_REGISTERS: usize = 4;
/// Weight rows packed between two `done` calls of [`PackedMatrix::new_releasing`].
pub const PACK_CHUNK_ROWS: usize = 2048;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct A64([u8; 64]);

/// Where a packed matrix's bytes live: a vector of its own, or a piece of a [`HugeArena`].
enum Data {
    Own(Vec<A64>),
    Arena { _arena: Arc<HugeArena>, at: *mut A64, len: usize },
}

// SAFETY: an arena piece is this matrix's alone (the arena hands each range out once) and lives
// as long as the `Arc` held beside it; it is read and written as the vector would be.
unsafe impl Send for Data {}
unsafe impl Sync for Data {}

impl Data {
    /// `len` zeroed lines where `pages` says.
    fn new(len: usize, pages: Pages) -> Data {
        match pages {
            Pages::Small => Data::Own(vec![A64([0; 64]); len]),
            Pages::Huge(arena) => match arena.and_then(|a| Some((a, a.take(len * 64)?))) {
                Some((a, p)) => Data::Arena { _arena: a.clone(), at: p as *mut A64, len },
                None => Data::Own(crate::pages::huge_page_vec(len, A64([0; 64]))),
            },
        }
    }
    fn len(&self) -> usize {
        match self {
            Data::Own(v) => v.len(),
            Data::Arena { len, .. } => *len,
        }
    }
    fn as_ptr(&self) -> *const A64 {
        match self {
            Data::Own(v) => v.as_ptr(),
            Data::Arena { at, .. } => *at,
        }
    }
    fn as_mut_ptr(&mut self) -> *mut A64 {
        match self {
            Data::Own(v) => v.as_mut_ptr(),
            Data::Arena { at, .. } => *at,
        }
    }
}

/// A weight matrix in the packed layout (see the module docs).
pub struct PackedMatrix {
    t: GgmlType,
    n: usize,
    k: usize,
    nib: bool,
    /// High-bit planes after the nibbles (see the module docs).
    hb: u32,
    /// How the tiles read a block's scales (f16, or the k-quants' header and bytes).
    scales: Scales,
    min: bool,
    sh: i32,
    /// Bytes per block of one group (quants, d, m).
    block_bytes: usize,
    /// Bytes of the k-quants' header before each run of 8 blocks (0: none).
    header_bytes: usize,
    /// The tiles run with AVX-512 VNNI (else AVX2).
    vnni: bool,
    data: Data,
}

impl std::fmt::Debug for PackedMatrix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PackedMatrix({} [{} x {}])", self.t.name(), self.n, self.k)
    }
}

/// The types with packed kernels.
pub const PACKED_TYPES: [GgmlType; 7] =
    [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K];

/// (nibble storage, high-bit planes, Q8_1 family, SH) of a packable type. Q4_K multiplies like
/// Q4_1 (every 32-element sub-block has its scale `d·sc` and min `−dmin·m`), Q6_K like Q8_0 with
/// 6-bit quants and a scale per 16 elements (`d·sc`, two per block); both keep their scales as
/// the file does (module docs) and read Q8_K activations (see [`PackedMatrix::q8k_activations`]).
fn format(t: GgmlType) -> Option<(bool, u32, bool, i32)> {
    Some(match t {
        GgmlType::Q4_0 => (true, 0, false, 3),
        GgmlType::Q4_1 => (true, 0, true, 0),
        GgmlType::Q5_0 => (true, 1, false, 4),
        GgmlType::Q5_1 => (true, 1, true, 0),
        GgmlType::Q8_0 => (false, 0, false, 7),
        GgmlType::Q4_K => (true, 0, true, 0),
        GgmlType::Q6_K => (true, 2, false, 5),
        _ => return None,
    })
}

/// True when this CPU runs the packed kernels (the SIMD level, see [`crate::simd::cap_level`],
/// is AVX2 or AVX-512).
pub fn packed_available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::simd::{level, Level};
        matches!(level(), Level::Avx2 | Level::Avx512)
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

/// Decodes 32-element block `j` of a weight row into (d, m, unsigned quants): value = d·u + m
/// (Q8_1 family) or d·(u − 2^SH) (Q8_0 family).
fn decode_block(t: GgmlType, row: &[u8], j: usize, u: &mut [u8; 32]) -> (f32, f32) {
    if t == GgmlType::Q4_K {
        let b = &row[(j / 8) * 144..(j / 8 + 1) * 144];
        let h = |o: usize| crate::fp::f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]));
        let (sc, mn) = crate::quant::q4_k::scales_mins(&b[4..16]);
        let (sub, c) = (j % 8, (j % 8) / 2);
        let q = &b[16 + 32 * c..16 + 32 * c + 32];
        for l in 0..32 {
            u[l] = if sub % 2 == 0 { q[l] & 0x0f } else { q[l] >> 4 };
        }
        return (h(0) * sc[sub] as f32, -(h(2) * mn[sub] as f32));
    }
    if t == GgmlType::Q6_K {
        // two 16-element sub-blocks: (d·sc of the first, d·sc of the second), u = q + 32
        let b = &row[(j / 8) * 210..(j / 8 + 1) * 210];
        let d = crate::fp::f16_to_f32(u16::from_le_bytes([b[208], b[209]]));
        let o = 32 * (j % 8);
        // element e: half e/128, quarter (e%128)/32, l = e%32 (see quant::q6_k)
        let (half, quarter) = (o / 128, (o % 128) / 32);
        for l in 0..32 {
            let ql = b[64 * half + l + 32 * (quarter & 1)];
            let lo = if quarter >= 2 { ql >> 4 } else { ql & 0x0f };
            let hi = (b[128 + 32 * half + l] >> (2 * quarter)) & 3;
            u[l] = lo | (hi << 4);
        }
        let sc = |s: usize| (b[192 + s] as i8) as f32;
        return (d * sc(o / 16), d * sc(o / 16 + 1));
    }
    let bs = t.type_size();
    let b = &row[j * bs..(j + 1) * bs];
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

/// A k-quant block's scales as packed: the super-block's header values (`d`, and `−dmin` for
/// Q4_K) and the block's two bytes (Q4_K `sc`, `m`; Q6_K the halves' signed `sc`).
fn k_scales(t: GgmlType, row: &[u8], j: usize) -> ([f32; 2], [u8; 2]) {
    let h = |b: &[u8], o: usize| crate::fp::f16_to_f32(u16::from_le_bytes([b[o], b[o + 1]]));
    if t == GgmlType::Q4_K {
        let b = &row[(j / 8) * 144..(j / 8 + 1) * 144];
        let (sc, mn) = crate::quant::q4_k::scales_mins(&b[4..16]);
        return ([h(b, 0), -h(b, 2)], [sc[j % 8], mn[j % 8]]);
    }
    let b = &row[(j / 8) * 210..(j / 8 + 1) * 210];
    let s = 2 * (j % 8);
    ([h(b, 208), 0.0], [b[192 + s], b[192 + s + 1]])
}

/// Byte offset of block `b` in a group of `bb`-byte blocks with a `hb`-byte header before every
/// 8 (none when `hb` is 0).
#[inline(always)]
const fn block_offset(b: usize, bb: usize, hb: usize) -> usize {
    b * bb + (b / 8 + 1) * hb
}

/// Byte offset of the header of block `b`'s run of 8 (see [`block_offset`]).
#[inline(always)]
const fn header_offset(b: usize, bb: usize, hb: usize) -> usize {
    b / 8 * (8 * bb + hb)
}

/// How a tile reads a block's 16 scales (and mins).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Scales {
    /// f32 per block (k-quant groups unpacked to bytes).
    F32,
    /// f16 per block (the 32-element formats).
    F16,
    /// The k-quants: the super-block header's f32 times the block's bytes.
    K,
}

/// [`Scales`] as a const generic parameter.
pub(crate) const S_F32: u8 = 0;
pub(crate) const S_F16: u8 = 1;
pub(crate) const S_K: u8 = 2;

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
        Self::new_releasing(pool, t, w, n, k, Pages::Small, &|_| {})
    }

    /// As [`PackedMatrix::new`], packing [`PACK_CHUNK_ROWS`] rows at a time and calling
    /// `done(rows)` after each chunk, so a caller reading `w` from a memory map can drop the pages
    /// already packed: the source and the packed copy are then never both resident in full.
    /// `pages`: where the copy's memory comes from ([`crate::pages`]: huge pages for matrices
    /// decode streams).
    pub fn new_releasing(
        pool: &crate::ThreadPool,
        t: GgmlType,
        w: &[u8],
        n: usize,
        k: usize,
        pages: Pages,
        done: &dyn Fn(std::ops::Range<usize>),
    ) -> Option<PackedMatrix> {
        if !packable(t) {
            return None;
        }
        let (nib, hb, min, sh) = format(t)?;
        let rb = t
            .row_bytes(k)
            .unwrap_or_else(|| panic!("pack: k = {k} is not a multiple of 32"));
        assert!(w.len() >= n * rb, "pack: weight buffer too short");
        let qb = quant_bytes(nib, hb);
        // the `m` slot exists only where a kernel reads it (mins; Q6_K's second scale)
        let has_m = min || t == GgmlType::Q6_K;
        let kq = matches!(t, GgmlType::Q4_K | GgmlType::Q6_K);
        let scales = if kq { Scales::K } else { Scales::F16 };
        let (block_bytes, header_bytes) = if kq { (qb + 32, 64 * (1 + min as usize)) } else { (qb + 32 * (1 + has_m as usize), 0) };
        let nb = k / 32;
        let ng = n.div_ceil(PNR);
        let group_bytes = nb * block_bytes + nb / 8 * header_bytes;
        let vnni = crate::simd::level() == crate::simd::Level::Avx512;
        // the AVX2 tile multiplies Q8_0's signed quants as they are (`|q|·sign(x, q)`)
        let q8_signed = t == GgmlType::Q8_0 && !vnni;
        let len = (ng * group_bytes).div_ceil(64);
        let mut data = Data::new(len, pages);
        let base = crate::matmul::SendPtr(data.as_mut_ptr() as *mut u8);
        let fill = |g: usize| {
            // SAFETY: group g owns bytes g·group_bytes .. (g+1)·group_bytes of `data`.
            let dst =
                unsafe { std::slice::from_raw_parts_mut(base.get().add(g * group_bytes), group_bytes) };
            let mut u = [0u8; 32];
            for r in 0..PNR.min(n - g * PNR) {
                let row = &w[(g * PNR + r) * rb..(g * PNR + r + 1) * rb];
                for b in 0..nb {
                    let (d, m) = decode_block(t, row, b, &mut u);
                    let at = block_offset(b, block_bytes, header_bytes);
                    let blk = &mut dst[at..at + block_bytes];
                    let uw = |i: usize| u32::from_le_bytes([u[i], u[i + 1], u[i + 2], u[i + 3]]);
                    let put = |blk: &mut [u8], off: usize, v: u32| {
                        assert!(off + 4 <= blk.len());
                        // SAFETY: checked just above.
                        unsafe { (blk.as_mut_ptr().add(off) as *mut u32).write_unaligned(v.to_le()) }
                    };
                    if nib {
                        let low = |i: usize| uw(i) & 0x0f0f_0f0f;
                        for tt in 0..4 {
                            put(blk, tt * 64 + 4 * r, low(4 * tt) | (low(16 + 4 * tt) << 4));
                        }
                        // chunk s's high bits (none for 4-bit formats) into its plane, each
                        // plane's 4 bytes of this row gathered in a register and stored once
                        if hb > 0 {
                            let mut planes = [0u32; 2];
                            for s in 0..8 {
                                // chunk s holds elements 4s..4s + 4 (low nibbles for s < 4, high after)
                                let (plane, bit) = chunk_plane(s, hb as usize);
                                planes[plane / 64] |= ((uw(4 * s) >> 4) & 0x0303_0303) << bit;
                            }
                            for (p, &v) in planes[..hb as usize].iter().enumerate() {
                                put(blk, 256 + 64 * p + 4 * r, v);
                            }
                        }
                    } else {
                        let flip = if q8_signed { 0x8080_8080 } else { 0 };
                        for tt in 0..8 {
                            put(blk, tt * 64 + 4 * r, uw(4 * tt) ^ flip);
                        }
                    }
                    if kq {
                        let (hd, bytes) = k_scales(t, row, b);
                        // the tiles' products are the f32 scales of `decode_block`
                        debug_assert!({
                            let q6 = t == GgmlType::Q6_K;
                            let f = |i: usize| if q6 { bytes[i] as i8 as f32 } else { bytes[i] as f32 };
                            let (dd, mm) = (hd[0] * f(0), if q6 { hd[0] * f(1) } else { hd[1] * f(1) });
                            dd.to_bits() == d.to_bits() && mm.to_bits() == m.to_bits()
                        });
                        blk[qb + r] = bytes[0];
                        blk[qb + 16 + r] = bytes[1];
                        if b % 8 == 0 {
                            let head = &mut dst[header_offset(b, block_bytes, header_bytes)..];
                            for (i, v) in hd.into_iter().take(header_bytes / 64).enumerate() {
                                put(head, 64 * i + 4 * r, v.to_bits());
                            }
                        }
                        continue;
                    }
                    for (off, v) in [(0, d), (32, m)].into_iter().take(1 + has_m as usize) {
                        let h = crate::fp::f32_to_f16(v);
                        debug_assert_eq!(crate::fp::f16_to_f32(h).to_bits(), v.to_bits(), "pack: scale not an f16");
                        blk[qb + off + 2 * r..qb + off + 2 * r + 2].copy_from_slice(&h.to_le_bytes());
                    }
                }
            }
        };
        let chunk_groups = PACK_CHUNK_ROWS / PNR;
        for g0 in (0..ng).step_by(chunk_groups) {
            let g1 = (g0 + chunk_groups).min(ng);
            if g1 - g0 > 1 && pool.threads() > 1 {
                pool.run(g1 - g0, &|i| fill(g0 + i));
            } else {
                (g0..g1).for_each(fill);
            }
            done(g0 * PNR..(g1 * PNR).min(n));
        }
        Some(PackedMatrix {
            t,
            n,
            k,
            nib,
            hb,
            scales,
            min,
            sh,
            block_bytes,
            header_bytes,
            vnni,
            data,
        })
    }

    /// Runs the tiles with AVX-512 VNNI or AVX2 from now on (tests compare the two on one
    /// machine); Q8_0's quants are rewritten between the two tiles' forms (`q + 128`, `q`).
    #[cfg(test)]
    pub(crate) fn set_vnni(&mut self, vnni: bool) {
        if self.t == GgmlType::Q8_0 && vnni != self.vnni {
            let qb = self.quant_bytes();
            let bb = self.block_bytes;
            let len = self.n.div_ceil(PNR) * self.group_bytes();
            // SAFETY: the packed data holds `len` bytes (groups of whole blocks).
            let bytes = unsafe { std::slice::from_raw_parts_mut(self.data.as_mut_ptr() as *mut u8, len) };
            for blk in bytes.chunks_exact_mut(bb) {
                blk[..qb].iter_mut().for_each(|v| *v ^= 0x80);
            }
        }
        self.vnni = vnni;
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
    /// Bytes of quants (nibbles and planes, or bytes) per block of a group.
    fn quant_bytes(&self) -> usize {
        quant_bytes(self.nib, self.hb)
    }
    pub(crate) fn group_bytes(&self) -> usize {
        self.k / 32 * self.block_bytes + self.k / 256 * self.header_bytes
    }
    /// The activations are llama.cpp's Q8_K (k-quant weights), rewritten per 32-element block
    /// as Split32 (scale `d` of the super-block, `s = d·Σq` of the block).
    pub(crate) fn q8k_activations(&self) -> bool {
        matches!(self.t, GgmlType::Q4_K | GgmlType::Q6_K)
    }
    /// What the activation rows must look like for this matrix's tiles: matrices with equal forms
    /// read the same quantized rows (Q8_K or not, Q8_1 or Q8_0, per-16 sums, offset shift).
    pub(crate) fn act_form(&self) -> (bool, bool, bool, i32) {
        (self.q8k_activations(), self.min, self.sub16(), if self.min { 0 } else { self.sh })
    }
    /// The dot type of the activation rows the tiles read: Q8_1 (with `s`) for weights with a
    /// min, else Q8_0 (Q8_K activations are rewritten into the same Split32 rows).
    pub(crate) fn act_dot_type(&self) -> crate::quant::DotType {
        if self.min {
            crate::quant::DotType::Q8_1
        } else {
            crate::quant::DotType::Q8_0
        }
    }
    /// Bytes of one activation row the tiles read: a Split32 row, and for Q6_K the i32 sums of
    /// its 16-element halves after it.
    pub(crate) fn act_row_bytes(&self) -> usize {
        crate::simd::act_row_bytes(crate::simd::ActLayout::Split32, self.act_dot_type(), self.k)
            + if self.sub16() { 4 * (self.k / 32) } else { 0 }
    }
    /// Q6_K: two scales per 32-element block (the `m` slot holds the second), and the
    /// activation rows carry the i32 sums of every 16 quants instead of `s`.
    pub(crate) fn sub16(&self) -> bool {
        self.t == GgmlType::Q6_K
    }
    /// Rewrites the activation rows' per-block quant sums (Q8_0-family weights, Q6_K: `Σq` of
    /// each block or 16-element half, i32) as `−(Σq << SH)`: the correction for the weights'
    /// offset `u = q + 2^SH`, which the tiles then take as their integer sums' starting value.
    pub(crate) fn fold_corrections(&self, qx: &mut [u8], m: usize, xrb: usize) {
        if self.min {
            return;
        }
        let (k, nb) = (self.k, self.k / 32);
        let sums = if self.sub16() { 2 * nb } else { nb };
        for row in qx.chunks_exact_mut(xrb).take(m) {
            for c in row[k + 4 * nb..k + 4 * nb + 4 * sums].chunks_exact_mut(4) {
                let v = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                c.copy_from_slice(&(-(v << self.sh)).to_le_bytes());
            }
        }
    }

    /// Activation rows the driver hands one [`PackedMatrix::tile`] call: [`PMR`], or more where
    /// rebuilding quants from nibbles (and planes) takes a large share of the multiplies' ports
    /// (every nibble format: on AVX2 it costs as much as the multiplies, and on Intel cores the
    /// split shares the two 512-bit ports with `vpdpbusd`): the tile then rebuilds the group's
    /// bytes once for all its passes instead of once per pass.
    pub(crate) fn rows_per_tile(&self) -> usize {
        if self.unpacks() {
            UNPACK_ROWS
        } else {
            PMR
        }
    }

    /// Whether tiles over more rows than [`PackedMatrix::unpack_above`] rebuild a group's quants
    /// as bytes once per call ([`UNPACK_ROWS`] rows, a prefill's [`PREFILL_UNPACK_ROWS`]) instead
    /// of from nibbles (and planes) on every pass: every nibble format (VNNI, Intel host: Q4_K prefill tile +12 %, Q5_0 +5–11 %, Q4_1
    /// −1 to +3 %).
    fn unpacks(&self) -> bool {
        self.nib
    }

    /// Activation rows above which a tile call rebuilds the group's quants as bytes (see
    /// [`PackedMatrix::unpacks`]): more than one pass, except for 4- and 5-bit nibbles, whose
    /// rebuild in registers is cheap enough that a decode step's 5–16 rows (2–4 passes) ran 3–6 %
    /// faster without the byte copy (AVX2; SmolLM2 and Qwen2.5-Coder, 8 and 16 sessions; Gemma-3
    /// 0–3 %; steps alternated in one process).
    fn unpack_above(&self) -> usize {
        if self.sub16() {
            self.rows_per_pass()
        } else {
            NIBBLE_PASSES_IN_REGISTERS * self.rows_per_pass()
        }
    }

    /// Activation rows one pass of the tile keeps in registers.
    fn rows_per_pass(&self) -> usize {
        match (self.vnni, self.sub16()) {
            (true, _) => PMR,
            (false, true) => avx2::MR_WIDE,
            (false, false) => avx2::MR,
        }
    }

    pub(crate) fn ptr(&self) -> *const u8 {
        self.data.as_ptr() as *const u8
    }

    /// The micro-tile: `nx` (≤ [`PackedMatrix::rows_per_tile`], or in a prefill
    /// [`PackedMatrix::prefill_rows_per_tile`]) activation rows at `x` (Split32 rows, stride `xs`)
    /// against group `g`, and with `ncols` > 16 group `g + 1` too (see
    /// [`PackedMatrix::pairs`]); writes `ncols` (≤ 32) outputs of each row to `y + j·ldy`, asking
    /// for the groups' bytes ahead as `fetch` says.
    ///
    /// # Safety
    /// `x` must hold `nx` Split32 rows of this matrix's `k`, `y` the outputs, the CPU must run
    /// the packed kernels.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) unsafe fn tile(
        &self,
        g: usize,
        x: *const u8,
        xs: usize,
        nx: usize,
        y: *mut f32,
        ldy: usize,
        ncols: usize,
        fetch: Fetch,
    ) {
        #[cfg(target_arch = "x86_64")]
        {
            let pair = ncols > PNR;
            if pair && !(self.pairs() && self.bytes_tile(nx)) {
                self.tile(g, x, xs, nx, y, ldy, PNR, fetch);
                return self.tile(g + 1, x, xs, nx, y.add(PNR), ldy, ncols - PNR, fetch);
            }
            let wg = self.ptr().add(g * self.group_bytes());
            let a = Args {
                nb: self.k / 32,
                k: self.k,
                wg,
                bb: self.block_bytes,
                hb: self.header_bytes,
                x,
                xs,
                y,
                ldy,
                ncols: ncols.min(PNR),
                prefetch: fetch != Fetch::Cached,
                near: fetch == Fetch::Stream,
            };
            // the second group of a pair: the next group's bytes and 16 columns on
            let a2 = pair.then(|| Args { wg: wg.add(self.group_bytes()), y: y.add(PNR), ncols: ncols - PNR, ..a });
            if self.unpacks() && nx > self.unpack_above() {
                // rebuild the groups' bytes once for all passes (see `rows_per_tile`)
                // the k-quants' scales become f32 per block (the products the tiles would form)
                let (scale_bytes, scales) = match self.scales {
                    Scales::K => (128, Scales::F32),
                    s => (self.block_bytes - self.quant_bytes(), s),
                };
                let ob = 512 + scale_bytes;
                return UNPACKED.with(|buf| {
                    let mut buf = buf.borrow_mut();
                    let need = (1 + pair as usize) * (a.nb * ob).div_ceil(64);
                    if buf.len() < need {
                        buf.resize(need, A64([0; 64]));
                    }
                    let out = buf.as_mut_ptr() as *mut u8;
                    let out2 = out.add(64 * (a.nb * ob).div_ceil(64));
                    for (from, to) in [(Some(&a), out), (a2.as_ref(), out2)].into_iter().filter_map(|(f, t)| Some((f?, t))) {
                        match (self.vnni, self.hb) {
                            (true, 0) => avx512::unpack_group::<0>(from, scale_bytes, to),
                            (true, 1) => avx512::unpack_group::<1>(from, scale_bytes, to),
                            (true, _) => avx512::unpack_group::<2>(from, scale_bytes, to),
                            (false, 0) => avx2::unpack_group::<0>(from, scale_bytes, to),
                            (false, 1) => avx2::unpack_group::<1>(from, scale_bytes, to),
                            (false, _) => avx2::unpack_group::<2>(from, scale_bytes, to),
                        }
                    }
                    let bytes = Args { wg: out, bb: ob, hb: 0, prefetch: false, ..a };
                    if !self.vnni {
                        let kind = match (self.sub16(), self.hb) {
                            (true, _) => avx2::Kind::Sub16Bytes,
                            (false, 0) => avx2::Kind::Nib4Bytes,
                            _ => avx2::Kind::NibBytes,
                        };
                        return avx2::tile(&bytes, kind, self.min, scales, nx);
                    }
                    if self.sub16() {
                        for j0 in (0..nx).step_by(PMR) {
                            by_rows!((nx - j0).min(PMR), tile16::<false>, &bytes.rows(j0));
                        }
                        return;
                    }
                    let bytes2 = a2.map(|a2| Args { wg: out2, y: a2.y, ncols: a2.ncols, ..bytes });
                    self.bytes_passes(&bytes, bytes2.as_ref(), scales, nx);
                });
            }
            if !self.vnni {
                let kind = match (self.nib, self.hb) {
                    _ if self.sub16() => avx2::Kind::Sub16,
                    (true, 0) => avx2::Kind::Nibbles,
                    (true, _) => avx2::Kind::Bits5,
                    (false, _) => avx2::Kind::Bytes8,
                };
                return avx2::tile(&a, kind, self.min, self.scales, nx);
            }
            if !self.nib {
                return self.bytes_passes(&a, a2.as_ref(), self.scales, nx);
            }
            // passes of PMR rows; the group's bytes are in cache after the first
            for j0 in (0..nx).step_by(PMR) {
                let a = &a.rows(j0);
                let r = (nx - j0).min(PMR);
                if self.sub16() {
                    by_rows!(r, tile16::<true>, a);
                    continue;
                }
                match (self.hb, self.min, self.scales == Scales::K) {
                    (0, true, false) => by_rows!(r, tile::<true, 0, true, S_F16>, a),
                    (0, true, true) => by_rows!(r, tile::<true, 0, true, S_K>, a),
                    (0, false, _) => by_rows!(r, tile::<true, 0, false, S_F16>, a),
                    (_, true, _) => by_rows!(r, tile::<true, 1, true, S_F16>, a),
                    (_, false, _) => by_rows!(r, tile::<true, 1, false, S_F16>, a),
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = (g, x, xs, nx, y, ldy, ncols);
            unreachable!("packed kernels are x86_64 only");
        }
    }

    /// Whether two groups side by side run as one VNNI tile where the quants are bytes
    /// ([`PackedMatrix::bytes_tile`]): every format but Q6_K (two sub-block scales).
    pub(crate) fn pairs(&self) -> bool {
        self.vnni && !self.sub16()
    }

    /// Whether a tile over `nx` rows reads one byte per quant: Q8_0, or a nibble group rebuilt
    /// as bytes (see [`PackedMatrix::unpack_above`]).
    fn bytes_tile(&self, nx: usize) -> bool {
        !self.nib || nx > self.unpack_above()
    }

    /// Activation rows the driver hands one tile call in a prefill (many rows, each task's
    /// groups reread from L2 pass after pass): nibble groups rebuilt once for
    /// [`PREFILL_UNPACK_ROWS`]; VNNI tiles over two groups of Q8_0 run several passes of
    /// [`PAIR_ROWS`] a call.
    pub(crate) fn prefill_rows_per_tile(&self) -> usize {
        if self.nib {
            PREFILL_UNPACK_ROWS
        } else if self.pairs() {
            // Q8_0: 4 passes (the LM-head shape 32768 × 640 × 128 ran 14 % slower with 64 rows
            // a call: their activations no longer stay in L1 beside the two groups)
            4 * PAIR_ROWS
        } else {
            self.rows_per_tile()
        }
    }

    /// VNNI passes over a group (`a`) or two (`a2`) of one byte per quant (Q8_0, or rebuilt
    /// bytes whose scales read as `scales`): at most [`PMR`] rows a pass for one group,
    /// [`PAIR_ROWS`] for two; later passes find the bytes in cache.
    #[cfg(target_arch = "x86_64")]
    unsafe fn bytes_passes(&self, a: &Args, a2: Option<&Args>, scales: Scales, nx: usize) {
        // passes of even size (8 rows as 4 + 4, not 6 + 2: short passes are latency bound)
        let passes = nx.div_ceil(if a2.is_some() { PAIR_ROWS } else { PMR });
        for i in 0..passes {
            let (j0, r) = (i * nx / passes, (i + 1) * nx / passes - i * nx / passes);
            let p = a.rows(j0);
            match a2 {
                Some(a2) => {
                    let p2 = a2.rows(j0);
                    match (self.min, scales) {
                        (true, Scales::F32) => by_pair_rows!(r, pair::<true, S_F32>, &p, &p2),
                        (true, _) => by_pair_rows!(r, pair::<true, S_F16>, &p, &p2),
                        (false, _) => by_pair_rows!(r, pair::<false, S_F16>, &p, &p2),
                    }
                }
                None => match (self.min, scales) {
                    (true, Scales::F32) => by_rows!(r, tile::<false, 0, true, S_F32>, &p),
                    (true, _) => by_rows!(r, tile::<false, 0, true, S_F16>, &p),
                    (false, _) => by_rows!(r, tile::<false, 0, false, S_F16>, &p),
                },
            }
        }
    }
}

/// Bytes of quants per block of a group: nibbles and `hb` planes, or one byte per quant.
const fn quant_bytes(nib: bool, hb: u32) -> usize {
    if nib {
        256 + 64 * hb as usize
    } else {
        512
    }
}

/// Bytes of a block's 16 scales (or mins) read as `S` (per block: f32 or f16).
const fn scale_bytes(s: u8) -> usize {
    if s == S_F16 {
        32
    } else {
        64
    }
}

/// Where nibble chunk `s`'s high bits lie in the planes of a `hb`-bit format: the plane's byte
/// offset from the first plane, and the bit of each byte they start at.
const fn chunk_plane(s: usize, hb: usize) -> (usize, usize) {
    let bit = s * hb;
    (64 * (bit / 8), bit % 8)
}

/// `avx512::$f::<$g.., nx>($a)` for a row count `nx` in 1..=PMR.
#[cfg(target_arch = "x86_64")]
macro_rules! by_rows {
    ($nx:expr, $f:ident :: <$($g:tt),*>, $a:expr) => {
        match $nx {
            1 => avx512::$f::<$($g,)* 1>($a),
            2 => avx512::$f::<$($g,)* 2>($a),
            3 => avx512::$f::<$($g,)* 3>($a),
            4 => avx512::$f::<$($g,)* 4>($a),
            5 => avx512::$f::<$($g,)* 5>($a),
            6 => avx512::$f::<$($g,)* 6>($a),
            7 => avx512::$f::<$($g,)* 7>($a),
            _ => avx512::$f::<$($g,)* 8>($a),
        }
    };
}
use by_rows;

/// `avx512::$f::<$g.., nx>($a, $a2)` for a row count `nx` in 1..=PAIR_ROWS.
#[cfg(target_arch = "x86_64")]
macro_rules! by_pair_rows {
    ($nx:expr, $f:ident :: <$($g:tt),*>, $a:expr, $a2:expr) => {
        match $nx {
            1 => avx512::$f::<$($g,)* 1>($a, $a2),
            2 => avx512::$f::<$($g,)* 2>($a, $a2),
            3 => avx512::$f::<$($g,)* 3>($a, $a2),
            4 => avx512::$f::<$($g,)* 4>($a, $a2),
            5 => avx512::$f::<$($g,)* 5>($a, $a2),
            _ => avx512::$f::<$($g,)* 6>($a, $a2),
        }
    };
}
use by_pair_rows;

#[cfg(target_arch = "x86_64")]
thread_local! {
    /// One group of nibble quants rebuilt to bytes for the tiles.
    static UNPACKED: std::cell::RefCell<Vec<A64>> = const { std::cell::RefCell::new(Vec::new()) };
}

#[cfg(target_arch = "x86_64")]
pub(crate) struct Args {
    nb: usize,
    k: usize,
    wg: *const u8,
    bb: usize,
    /// Header bytes before every 8 blocks (k-quants; see [`block_offset`]).
    hb: usize,
    x: *const u8,
    xs: usize,
    y: *mut f32,
    ldy: usize,
    ncols: usize,
    /// Whether the tile asks for its bytes ahead (see [`prefetch_ahead`]): only the first
    /// pass over a group in memory; later passes and unpacked copies find theirs in cache.
    prefetch: bool,
    /// Whether it also asks for them into L1 shortly before use: where the group is read once.
    near: bool,
}

#[cfg(target_arch = "x86_64")]
impl Args {
    /// The same call from activation row `j0` on: a later pass, whose group's bytes the first
    /// pass brought into cache (asks for nothing ahead).
    #[inline(always)]
    unsafe fn rows(&self, j0: usize) -> Args {
        Args { x: self.x.add(j0 * self.xs), y: self.y.add(j0 * self.ldy), prefetch: self.prefetch && j0 == 0, ..*self }
    }
    /// Block `b` of the group.
    #[inline(always)]
    unsafe fn block(&self, b: usize) -> *const u8 {
        self.wg.add(block_offset(b, self.bb, self.hb))
    }
    /// The header of block `b`'s run of 8 (k-quants).
    #[inline(always)]
    unsafe fn header(&self, b: usize) -> *const u8 {
        self.wg.add(header_offset(b, self.bb, self.hb))
    }
    /// Bytes a tile asks for ahead at block `b`: the block's, and after a run's last block the
    /// next header too, so the asks tile the group without asking for a line twice.
    #[inline(always)]
    fn ahead_bytes(&self, b: usize) -> usize {
        self.bb + if b % 8 == 7 { self.hb } else { 0 }
    }
}

/// What a tile call asks for ahead of its weight reads.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// Nothing: a later row pass over a group its first pass brought into cache (16 decoding
    /// sessions, against asking into L2 again: steps 0.3–4 % shorter, alternated in one process;
    /// a prefill task's later passes over its L2-sized range: VNNI tiles 3–9 % faster).
    Cached,
    /// Into L2 a page ahead (see [`prefetch_ahead`]): a prefill task's first pass over its range.
    Page,
    /// Into L2 and, shortly before use, L1: a decode step's first pass, the group's one read.
    Stream,
}

/// How far past the block it multiplies a prefill tile asks for weight bytes. The hardware
/// prefetchers stop at every 4 KiB page, and a tile's work per cache line leaves too few misses
/// in flight to hide memory latency by itself; a page ahead keeps the stream going (3, 6 and 8 KiB
/// measured the same on Intel; 8 KiB made 8-chunk prefills on Zen 4 no faster, within noise).
#[cfg(target_arch = "x86_64")]
const PAGE_AHEAD_BYTES: usize = 4096;

/// The same distance for a decode step's tiles (`Args::near`), which read each weight byte once.
/// A one-row tile keeps in flight little more than it asks for, and a page of that did not cover
/// memory latency on Zen 4: one row on one thread streamed 18.5–19.2 GB/s with 4 KiB and 26–29
/// with 8 KiB (a plain read 29–33); whole decode steps, the distances alternated step by step in
/// one process: 20–27 % shorter on all three real models in minutes when two threads read
/// ~60 GB/s, SmolLM2 13 % and the larger two the same when they read ~35 GB/s, 8 sessions 1–3 %
/// shorter. 16 KiB measured as 8; on the Intel guests 4–16 KiB measured the same.
#[cfg(target_arch = "x86_64")]
const STREAM_AHEAD_BYTES: usize = 8192;

/// How far past the block a streaming tile also asks for weight bytes into L1.
#[cfg(target_arch = "x86_64")]
const NEAR_BYTES: usize = 1024;

/// Asks for the `bb` bytes [`PAGE_AHEAD_BYTES`] past `wb` into L2 (a hint: it never faults,
/// whatever the address); with `near`, those [`STREAM_AHEAD_BYTES`] past it instead, and those
/// [`NEAR_BYTES`] past it into L1 too, lines the first request brought to L2 by then. Into L1
/// alone, at 1–8 KiB, one decode row lost 5–12 %; both, against L2 alone (8 rows, matrices beyond
/// the L3, runs alternated in one process, Emerald Rapids): +5–9 % GB/s, and one row +2–5 %; 512 B
/// and 2 KiB measured the same as 1 KiB. A prefill's tiles reread their groups from L2 and skip
/// the L1 ask (the SmolLM2 prefill bench was 2–4 % slower when every tile asked).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn prefetch_ahead(wb: *const u8, bb: usize, near: bool) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0, _MM_HINT_T2};
    let far = if near { STREAM_AHEAD_BYTES } else { PAGE_AHEAD_BYTES };
    for l in (0..bb).step_by(64) {
        if near {
            _mm_prefetch::<_MM_HINT_T0>(wb.wrapping_add(NEAR_BYTES + l) as *const i8);
        }
        _mm_prefetch::<_MM_HINT_T2>(wb.wrapping_add(far + l) as *const i8);
    }
}

/// Asks for the lines that rows `j0..j0 + rows` of a tile's outputs will be stored to, at the
/// start of its pass: output rows lie a row of the product apart, and stores that find their
/// lines missing held up the next tile (packed bench, Q8_0 on VNNI: +6–15 % at n = 2048–32768;
/// 8-chunk prefills with the AVX2 tiles 2–4 % shorter, alternated).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn fetch_outputs(a: &Args, j0: usize, rows: usize) {
    use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    for j in j0..j0 + rows {
        let y = a.y.add(j * a.ldy);
        _mm_prefetch::<_MM_HINT_T0>(y as *const i8);
        _mm_prefetch::<_MM_HINT_T0>(y.wrapping_add(a.ncols.saturating_sub(1)) as *const i8);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(test)]
mod saturate;
#[cfg(all(test, target_arch = "x86_64"))]
mod tests;
