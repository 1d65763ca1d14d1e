//! The int8 dot-product peak of one core, the ceiling the packed kernels are held against:
//! independent multiply-accumulate chains on L1-resident bytes, nothing else in the loop.
//! AVX2: `vpmaddubsw` + `vpmaddwd` (by ones) + `vpaddd` per 32 byte products;
//! AVX-512 VNNI: one `vpdpbusd` per 64. And each format's own ceiling ([`step_gflops`]): the
//! operations its tile cannot avoid per block, llama.cpp's f32 step per 32-element block included.

#![allow(clippy::needless_range_loop)] // register tiles index several parallel arrays

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

/// The f32 step a block format needs per 32-element block, output column and activation row
/// (llama.cpp's arithmetic, which the tiles keep): `No` min: convert, scale (`d·dx`), FMA; `Min`:
/// and the min's FMA; `Sub16` (Q6_K): two 16-element sums, two converts, a multiply and two FMAs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Epilogue {
    No,
    Min,
    Sub16,
}

/// A format's step alone: its tile's unavoidable operations per block on L1 bytes, nothing else
/// (no nibble split: prefill tiles read one byte per quant).
#[derive(Clone, Copy)]
pub struct Step {
    pub epilogue: Epilogue,
    /// AVX2: chunks of `vpmaddubsw` pair sums added in i16 before one `vpmaddwd` (4-bit 8, 5-bit
    /// 4, Q6_K 2); 0: Q8_0, `|q|` against `sign(x, q)` and a widening per chunk.
    pub i16_chunks: usize,
}

impl Step {
    /// The step of the packed tiles for `t`.
    pub fn of(t: lse_kernels::GgmlType) -> Step {
        use lse_kernels::GgmlType as G;
        let epilogue = match t {
            G::Q4_1 | G::Q5_1 | G::Q4_K => Epilogue::Min,
            G::Q6_K => Epilogue::Sub16,
            _ => Epilogue::No,
        };
        let i16_chunks = match t {
            G::Q4_0 | G::Q4_1 | G::Q4_K => 8,
            G::Q5_0 | G::Q5_1 => 4,
            G::Q6_K => 2,
            _ => 0,
        };
        Step { epilogue, i16_chunks }
    }
}

/// GFLOP/s of `step` on this machine's tile (VNNI, else AVX2), best of 5, over the register
/// shapes a tile can take (VNNI: 1 group × 8 rows or 2 groups × 6; AVX2: 2–4 rows over both
/// 8-column halves): the ceiling of that format's tile, as the int8 peak is of any.
pub fn step_gflops(step: Step) -> f64 {
    let w: Vec<u8> = (0..2 * NB * 512).map(|i| (i * 37 % 251) as u8).collect();
    let x: Vec<u8> = (0..8 * NB * 32).map(|i| (i * 13 % 127) as u8).collect();
    // scales: normal floats (a subnormal operand costs Golden Cove a microcode assist)
    let f: Vec<f32> = (0..2 * 8 * NB * 16 + 64).map(|i| 0.5 + (i % 7) as f32 / 64.0).collect();
    let reps = 4000;
    let run = |g: usize, r: usize, go: &dyn Fn() -> f32| best_of(5, 2.0 * (reps * NB * 32 * 16 * g * r) as f64, || go() as i32);
    let (w, x, f) = (&w, &x, &f);
    if is_x86_feature_detected!("avx512vnni") && lse_kernels::simd::level() == lse_kernels::simd::Level::Avx512 {
        macro_rules! vnni {
            ($g:literal, $r:literal) => {
                run($g, $r, &|| unsafe {
                    match step.epilogue {
                        Epilogue::No => vnni_step::<$g, $r, 0>(w, x, f, reps),
                        Epilogue::Min => vnni_step::<$g, $r, 1>(w, x, f, reps),
                        Epilogue::Sub16 => vnni_step::<$g, $r, 2>(w, x, f, reps),
                    }
                })
            };
        }
        vnni!(1, 8).max(vnni!(2, 6))
    } else {
        macro_rules! avx2 {
            ($r:literal) => {
                run(1, $r, &|| unsafe {
                    match (step.epilogue, step.i16_chunks) {
                        (_, 0) => avx2_step::<$r, 0, 1>(w, x, f, reps),
                        (Epilogue::Sub16, _) => avx2_step::<$r, 2, 2>(w, x, f, reps),
                        (Epilogue::Min, 8) => avx2_step::<$r, 8, 1>(w, x, f, reps),
                        (Epilogue::Min, _) => avx2_step::<$r, 4, 1>(w, x, f, reps),
                        (_, 8) => avx2_step::<$r, 8, 0>(w, x, f, reps),
                        _ => avx2_step::<$r, 4, 0>(w, x, f, reps),
                    }
                })
            };
        }
        avx2!(2).max(avx2!(3)).max(avx2!(4))
    }
}

/// Blocks per pass of a step loop (k = 640: a group's bytes stay in L1).
const NB: usize = 20;

/// `f`'s f32 step of one block for sums `ia` (`E`: 0 no min, 1 min, 2 two 16-element sums `ia`,
/// `ib`), 16 columns: the VNNI tile's operations and order.
#[inline(always)]
unsafe fn vnni_epilogue<const E: u8>(ia: __m512i, ib: __m512i, f: *const f32, acc: __m512) -> __m512 {
    let (d, dx) = (_mm512_loadu_ps(f), _mm512_set1_ps(*f.add(16)));
    match E {
        0 => _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(d, dx), acc),
        1 => _mm512_fmadd_ps(_mm512_loadu_ps(f.add(32)), _mm512_set1_ps(*f.add(17)), _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(d, dx), acc)),
        _ => {
            let s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia), d, _mm512_mul_ps(_mm512_cvtepi32_ps(ib), _mm512_loadu_ps(f.add(32))));
            _mm512_fmadd_ps(s, dx, acc)
        }
    }
}

/// `G` groups × `R` rows of `NB` blocks (8 `vpdpbusd` each, Q6_K as two sums of 4) per pass.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
unsafe fn vnni_step<const G: usize, const R: usize, const E: u8>(w: &[u8], x: &[u8], f: &[f32], reps: usize) -> f32 {
    let (w, x, f) = (black_box(w.as_ptr()), x.as_ptr(), f.as_ptr());
    let mut facc = [[_mm512_setzero_ps(); R]; G];
    for _ in 0..reps {
        for b in 0..NB {
            let mut ia = [[_mm512_setzero_si512(); R]; G];
            let mut ib = [[_mm512_setzero_si512(); R]; G];
            for t in 0..8 {
                let v: [__m512i; G] = core::array::from_fn(|g| _mm512_loadu_si512(w.add((g * NB + b) * 512 + 64 * t) as *const _));
                for j in 0..R {
                    let xj = _mm512_set1_epi32((x.add((j * NB + b) * 32 + 4 * t) as *const i32).read_unaligned());
                    for g in 0..G {
                        if E == 2 && t >= 4 {
                            ib[g][j] = _mm512_dpbusd_epi32(ib[g][j], v[g], xj);
                        } else {
                            ia[g][j] = _mm512_dpbusd_epi32(ia[g][j], v[g], xj);
                        }
                    }
                }
            }
            for g in 0..G {
                for j in 0..R {
                    facc[g][j] = vnni_epilogue::<E>(ia[g][j], ib[g][j], f.add(((g * 8 + j) * NB + b) * 16), facc[g][j]);
                }
            }
        }
    }
    let t = facc.iter().flatten().fold(_mm512_setzero_ps(), |t, a| _mm512_add_ps(t, *a));
    _mm512_reduce_add_ps(t)
}

/// The AVX2 tile's step: `R` rows × both 8-column halves of `NB` blocks per pass, `C` chunks of
/// pair sums in i16 per widening (0: Q8_0's sign and widening per chunk), `E` as
/// [`vnni_epilogue`].
#[target_feature(enable = "avx2,fma")]
unsafe fn avx2_step<const R: usize, const C: usize, const E: u8>(w: &[u8], x: &[u8], f: &[f32], reps: usize) -> f32 {
    let (w, x, f) = (black_box(w.as_ptr()), x.as_ptr(), f.as_ptr());
    let ones = _mm256_set1_epi16(1);
    let mut facc = [[_mm256_setzero_ps(); R]; 2];
    for _ in 0..reps {
        for b in 0..NB {
            let wb = w.add(b * 512);
            let mut ia = [[_mm256_setzero_si256(); R]; 2];
            let mut ib = [[_mm256_setzero_si256(); R]; 2];
            let bx = |j: usize, t: usize| _mm256_set1_epi32((x.add((j * NB + b) * 32 + 4 * t) as *const i32).read_unaligned());
            if C == 0 {
                for t in 0..8 {
                    let q = [_mm256_loadu_si256(wb.add(64 * t) as *const _), _mm256_loadu_si256(wb.add(64 * t + 32) as *const _)];
                    let aq = [_mm256_abs_epi8(q[0]), _mm256_abs_epi8(q[1])];
                    for j in 0..R {
                        let xj = bx(j, t);
                        for h in 0..2 {
                            let p = _mm256_maddubs_epi16(aq[h], _mm256_sign_epi8(xj, q[h]));
                            ia[h][j] = _mm256_add_epi32(ia[h][j], _mm256_madd_epi16(p, ones));
                        }
                    }
                }
            } else {
                for t0 in (0..8).step_by(C) {
                    let mut s = [[_mm256_setzero_si256(); R]; 2];
                    for t in t0..t0 + C {
                        let u = [_mm256_loadu_si256(wb.add(64 * t) as *const _), _mm256_loadu_si256(wb.add(64 * t + 32) as *const _)];
                        for j in 0..R {
                            let xj = bx(j, t);
                            for h in 0..2 {
                                s[h][j] = _mm256_add_epi16(s[h][j], _mm256_maddubs_epi16(u[h], xj));
                            }
                        }
                    }
                    for h in 0..2 {
                        for j in 0..R {
                            let acc = if E == 2 && t0 >= 4 { &mut ib[h][j] } else { &mut ia[h][j] };
                            *acc = _mm256_add_epi32(*acc, _mm256_madd_epi16(s[h][j], ones));
                        }
                    }
                }
            }
            for h in 0..2 {
                for j in 0..R {
                    let fp = f.add(((h * 8 + j) * NB + b) * 16);
                    let (d, dx) = (_mm256_loadu_ps(fp), _mm256_set1_ps(*fp.add(16)));
                    facc[h][j] = match E {
                        0 => _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[h][j]), _mm256_mul_ps(d, dx), facc[h][j]),
                        1 => _mm256_fmadd_ps(_mm256_loadu_ps(fp.add(32)), _mm256_set1_ps(*fp.add(17)), _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[h][j]), _mm256_mul_ps(d, dx), facc[h][j])),
                        _ => {
                            let s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ia[h][j]), d, _mm256_mul_ps(_mm256_cvtepi32_ps(ib[h][j]), _mm256_loadu_ps(fp.add(32))));
                            _mm256_fmadd_ps(s, dx, facc[h][j])
                        }
                    };
                }
            }
        }
    }
    let t = facc.iter().flatten().fold(_mm256_setzero_ps(), |t, a| _mm256_add_ps(t, *a));
    let mut o = [0f32; 8];
    _mm256_storeu_ps(o.as_mut_ptr(), t);
    o.iter().sum()
}
