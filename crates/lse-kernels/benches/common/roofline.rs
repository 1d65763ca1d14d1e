//! The int8 dot-product peak of one core, the ceiling the packed kernels are held against:
//! independent multiply-accumulate chains on L1-resident bytes, nothing else in the loop.
//! AVX2: `vpmaddubsw` + `vpmaddwd` (by ones) + `vpaddd` per 32 byte products;
//! AVX-512 VNNI: one `vpdpbusd` per 64.

use core::arch::x86_64::*;
use std::hint::black_box;

const BYTES: usize = 4096;

/// GFLOP/s (2 per byte product) of the AVX2 sequence, best of 5.
pub fn avx2_gflops() -> f64 {
    let buf: Vec<u8> = (0..BYTES + 64).map(|i| (i * 37 % 251) as u8).collect();
    let reps = 20_000;
    best_of(5, 2.0 * (reps * BYTES * 4) as f64, || unsafe { avx2_loop(&buf, reps) })
}

/// GFLOP/s of `vpdpbusd` on 512-bit registers, best of 5 (`None` without AVX-512 VNNI).
pub fn vnni_gflops() -> Option<f64> {
    if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni")) {
        return None;
    }
    let buf: Vec<u8> = (0..BYTES + 256).map(|i| (i * 37 % 251) as u8).collect();
    let reps = 20_000;
    Some(best_of(5, 2.0 * (reps * BYTES * 4) as f64, || unsafe { vnni_loop(&buf, reps) }))
}

fn best_of(n: usize, flops: f64, f: impl Fn() -> i32) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..n {
        let t0 = std::time::Instant::now();
        black_box(f());
        best = best.min(t0.elapsed().as_secs_f64());
    }
    flops / best / 1e9
}

/// Every 64 bytes read meet 4 weight registers: 8 × 32 = 256 byte products, 4 per byte.
#[target_feature(enable = "avx2")]
unsafe fn avx2_loop(buf: &[u8], reps: usize) -> i32 {
    let p = buf.as_ptr();
    let ones = _mm256_set1_epi16(1);
    let w: [__m256i; 4] = core::array::from_fn(|i| _mm256_set1_epi8(1 + i as i8));
    let mut acc = [_mm256_setzero_si256(); 8];
    for _ in 0..reps {
        let p = black_box(p); // the same bytes every pass: keep the compiler from reusing the sums
        for o in (0..BYTES).step_by(64) {
            let v = [_mm256_loadu_si256(p.add(o) as *const _), _mm256_loadu_si256(p.add(o + 32) as *const _)];
            for (i, wi) in w.iter().enumerate() {
                for (h, vh) in v.iter().enumerate() {
                    let s = _mm256_madd_epi16(_mm256_maddubs_epi16(*wi, *vh), ones);
                    acc[2 * i + h] = _mm256_add_epi32(acc[2 * i + h], s);
                }
            }
        }
    }
    let mut t = acc[0];
    for a in &acc[1..] {
        t = _mm256_add_epi32(t, *a);
    }
    _mm256_extract_epi32::<0>(t)
}

/// Every 256 bytes read meet 4 weight registers: 16 × 64 = 1024 byte products, 4 per byte. 16
/// independent sums: `vpdpbusd` takes ~5 cycles and Golden Cove issues two a cycle, so fewer
/// chains measure their latency (8 gave 70 % of the Emerald Rapids host's peak).
#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vnni_loop(buf: &[u8], reps: usize) -> i32 {
    let p = buf.as_ptr();
    let w: [__m512i; 4] = core::array::from_fn(|i| _mm512_set1_epi8(1 + i as i8));
    let mut acc = [_mm512_setzero_si512(); 16];
    for _ in 0..reps {
        let p = black_box(p);
        for o in (0..BYTES).step_by(256) {
            let v: [__m512i; 4] = core::array::from_fn(|h| _mm512_loadu_si512(p.add(o + 64 * h) as *const _));
            for (i, wi) in w.iter().enumerate() {
                for (h, vh) in v.iter().enumerate() {
                    acc[4 * i + h] = _mm512_dpbusd_epi32(acc[4 * i + h], *wi, *vh);
                }
            }
        }
    }
    let mut t = acc[0];
    for a in &acc[1..] {
        t = _mm512_add_epi32(t, *a);
    }
    _mm512_reduce_add_epi32(t)
}

/// GFLOP/s of the AVX2 Q8_0 × Q8_0 step alone (no loads of weights, no scales): a broadcast
/// 4-byte activation load, `vpsignb`, `vpmaddubsw`, `vpmaddwd`, `vpaddd` per 32 products — the
/// ceiling of any exact 8-bit × 8-bit dot on AVX2 (a pair sum of two 8-bit products needs the
/// full i16 range, so each `vpmaddubsw` needs its own widening).
pub fn avx2_q8_gflops() -> f64 {
    let buf: Vec<u8> = (0..BYTES + 64).map(|i| (i * 37 % 251) as u8).collect();
    let reps = 20_000;
    best_of(5, 2.0 * (reps * BYTES * 32) as f64, || unsafe { avx2_q8_loop(&buf, reps) })
}

/// Every 4 bytes read are broadcast against 4 weight registers: 4 × 32 byte products, 32 per byte.
#[target_feature(enable = "avx2")]
unsafe fn avx2_q8_loop(buf: &[u8], reps: usize) -> i32 {
    let p = buf.as_ptr();
    let ones = _mm256_set1_epi16(1);
    let w: [__m256i; 4] = core::array::from_fn(|i| _mm256_set1_epi8(if i % 2 == 0 { 3 + i as i8 } else { -5 - i as i8 }));
    let aw: [__m256i; 4] = core::array::from_fn(|i| _mm256_abs_epi8(w[i]));
    let mut acc = [_mm256_setzero_si256(); 4];
    for _ in 0..reps {
        let p = black_box(p);
        for o in (0..BYTES).step_by(4) {
            let x = _mm256_set1_epi32((p.add(o) as *const i32).read_unaligned());
            for i in 0..4 {
                let s = _mm256_maddubs_epi16(aw[i], _mm256_sign_epi8(x, w[i]));
                acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s, ones));
            }
        }
    }
    let t = _mm256_add_epi32(_mm256_add_epi32(acc[0], acc[1]), _mm256_add_epi32(acc[2], acc[3]));
    _mm256_extract_epi32::<0>(t)
}

/// GFLOP/s of the VNNI block step alone: per 32-element block and activation row, the 8
/// `vpdpbusd` of 16 weight rows and the f32 epilogue every llama.cpp block format needs (convert
/// the i32 sums, scale by weight × activation scale, accumulate: `vcvtdq2ps`, `vmulps`, `vfmadd`),
/// on registers and L1 bytes only — the ceiling of a 32-element-block kernel (`None` without VNNI).
/// [`BLOCK_ROWS`] rows, as the tiles take at most: with 4, each row's chain of 8 dependent
/// `vpdpbusd` bounds the loop by their latency on Golden Cove (Emerald Rapids host: 4 rows 299,
/// 8 rows 342 GFLOP/s with scales read from the bytes; 8 rows and normal scales 489–502).
pub fn vnni_block_gflops() -> Option<f64> {
    if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni")) {
        return None;
    }
    let buf: Vec<u8> = (0..BYTES + 256).map(|i| (i * 37 % 251) as u8).collect();
    let reps = 20_000;
    // activation scales: normal floats (the bytes read as f32 include subnormals, and a
    // subnormal operand costs Golden Cove a microcode assist)
    let dx: Vec<f32> = (0..BYTES / 32 + BLOCK_ROWS).map(|i| 0.5 + (i % 7) as f32 / 64.0).collect();
    // per 32 bytes read: BLOCK_ROWS rows × 8 dpbusd × 64 products
    Some(best_of(5, 2.0 * (reps * BYTES / 32 * BLOCK_ROWS * 8 * 64) as f64, || unsafe { vnni_block_loop(&buf, &dx, reps) }))
}

/// Activation rows of the block step.
const BLOCK_ROWS: usize = 8;

#[target_feature(enable = "avx512f,avx512vnni")]
unsafe fn vnni_block_loop(buf: &[u8], dx: &[f32], reps: usize) -> i32 {
    let p = buf.as_ptr();
    let w: [__m512i; 8] = core::array::from_fn(|i| _mm512_set1_epi8(1 + i as i8));
    let dw = _mm512_set1_ps(0.5);
    let mut facc = [_mm512_setzero_ps(); BLOCK_ROWS];
    for _ in 0..reps {
        let p = black_box(p);
        for o in (0..BYTES).step_by(32) {
            for (j, f) in facc.iter_mut().enumerate() {
                let mut ia = _mm512_setzero_si512();
                for (t, wt) in w.iter().enumerate() {
                    ia = _mm512_dpbusd_epi32(ia, *wt, _mm512_set1_epi32((p.add(o + 32 * j + 4 * t) as *const i32).read_unaligned()));
                }
                let d = _mm512_set1_ps(*dx.get_unchecked(o / 32 + j));
                *f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(dw, d), *f);
            }
        }
    }
    let t = facc.iter().fold(_mm512_setzero_ps(), |t, f| _mm512_add_ps(t, *f));
    _mm512_reduce_add_ps(t) as i32
}

/// GFLOP/s of a whole Q4_1 block step of [`BLOCK_ROWS`] rows alone, the ceiling of that tile's
/// formulation: per 32-element block, the nibbles loaded and split (`vpand`, `vpsrlw`), 8
/// `vpdpbusd` per row, the f16 scales and mins converted, and per row the convert, scale, FMA
/// and the min's FMA; L1 bytes only (`None` without VNNI).
pub fn vnni_q4_1_step_gflops() -> Option<f64> {
    if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vnni")) {
        return None;
    }
    let nb = BYTES / 256;
    let w: Vec<u8> = (0..BYTES).map(|i| (i * 37 % 251) as u8).collect();
    let x: Vec<u8> = (0..BLOCK_ROWS * 32 * nb).map(|i| (i * 13 % 127) as u8).collect();
    let scales: Vec<u16> = (0..32 * nb).map(|i| half::f16::from_f32(0.01 + (i % 5) as f32 / 1000.0).to_bits()).collect();
    let act: Vec<f32> = (0..2 * BLOCK_ROWS * nb).map(|i| 0.5 + (i % 7) as f32 / 64.0).collect();
    let reps = 40_000;
    Some(best_of(5, 2.0 * (reps * nb * BLOCK_ROWS * 8 * 64) as f64, || unsafe { vnni_q4_1_loop(&w, &x, &scales, &act, reps) }))
}

#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn vnni_q4_1_loop(w: &[u8], x: &[u8], scales: &[u16], act: &[f32], reps: usize) -> i32 {
    let (nb, m0f) = (BYTES / 256, _mm512_set1_epi8(0x0f));
    let mut facc = [_mm512_setzero_ps(); BLOCK_ROWS];
    for _ in 0..reps {
        let wp = black_box(w.as_ptr());
        for b in 0..nb {
            let xb = x.as_ptr().add(BLOCK_ROWS * 32 * b);
            let mut ia = [_mm512_setzero_si512(); BLOCK_ROWS];
            for t in 0..4 {
                let v = _mm512_loadu_si512(wp.add(256 * b + 64 * t) as *const _);
                let lo = _mm512_and_si512(v, m0f);
                let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), m0f);
                for (j, a) in ia.iter_mut().enumerate() {
                    *a = _mm512_dpbusd_epi32(*a, lo, _mm512_set1_epi32((xb.add(32 * j + 4 * t) as *const i32).read_unaligned()));
                }
                for (j, a) in ia.iter_mut().enumerate() {
                    *a = _mm512_dpbusd_epi32(*a, hi, _mm512_set1_epi32((xb.add(32 * j + 16 + 4 * t) as *const i32).read_unaligned()));
                }
            }
            let dw = _mm512_cvtph_ps(_mm256_loadu_si256(scales.as_ptr().add(32 * b) as *const _));
            let mw = _mm512_cvtph_ps(_mm256_loadu_si256(scales.as_ptr().add(32 * b + 16) as *const _));
            for (j, f) in facc.iter_mut().enumerate() {
                let (dx, sx) = (act[2 * (BLOCK_ROWS * b + j)], act[2 * (BLOCK_ROWS * b + j) + 1]);
                *f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[j]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), *f);
                *f = _mm512_fmadd_ps(mw, _mm512_set1_ps(sx), *f);
            }
        }
    }
    let t = facc.iter().fold(_mm512_setzero_ps(), |t, f| _mm512_add_ps(t, *f));
    _mm512_reduce_add_ps(t) as i32
}
