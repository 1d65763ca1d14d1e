//! Test helpers: a small deterministic RNG, random weight rows per type, fixture loading and
//! independent decoders of the activation formats.
#![allow(dead_code)]

use half::f16;
use lse_gguf::GgufFile;
use lse_kernels::quant::{dot_type, quantize_activation, scalar_dot_fn};
use lse_kernels::GgmlType;
use std::path::PathBuf;

/// Caps the SIMD level to `LSE_BENCH_SIMD` (avx512, avx2 or scalar) when it is set and not empty:
/// the benches' way to measure what a CPU without the higher levels gets.
pub fn cap_simd_from_env() {
    if let Some(s) = std::env::var("LSE_BENCH_SIMD").ok().filter(|s| !s.is_empty()) {
        let level = lse_kernels::simd::parse_level(&s).unwrap_or_else(|| panic!("LSE_BENCH_SIMD={s}: use avx512, avx2 or scalar"));
        lse_kernels::simd::cap_level(level).unwrap_or_else(|e| panic!("{e}"));
    }
}

/// xorshift64*: deterministic, dependency-free.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Roughly N(0, 1) (sum of uniforms).
    pub fn normal(&mut self) -> f32 {
        (0..4).map(|_| self.unit()).sum::<f32>() * 1.732 - 3.464
    }
    pub fn fill_bytes(&mut self, b: &mut [u8]) {
        for v in b.iter_mut() {
            *v = self.next_u64() as u8;
        }
    }
}

/// Every weight type the kernels support.
pub fn types() -> Vec<GgmlType> {
    lse_kernels::quant::FORMATS.iter().map(|f| f.ty).collect()
}

/// `rows` random weight rows of `k` elements of type `t`: random quant bytes, finite scales.
pub fn random_weights(rng: &mut Rng, t: GgmlType, rows: usize, k: usize) -> Vec<u8> {
    let rb = t.row_bytes(k).unwrap();
    let mut w = vec![0u8; rows * rb];
    match t {
        GgmlType::F32 => {
            for c in w.chunks_exact_mut(4) {
                c.copy_from_slice(&(rng.normal() * 0.1).to_le_bytes());
            }
        }
        GgmlType::F16 => {
            for c in w.chunks_exact_mut(2) {
                c.copy_from_slice(&f16::from_f32(rng.normal() * 0.1).to_bits().to_le_bytes());
            }
        }
        GgmlType::BF16 => {
            for c in w.chunks_exact_mut(2) {
                c.copy_from_slice(&((((rng.normal() * 0.1).to_bits()) >> 16) as u16).to_le_bytes());
            }
        }
        _ => {
            rng.fill_bytes(&mut w);
            let bs = t.type_size();
            for b in w.chunks_exact_mut(bs) {
                lse_kernels::quant::format(t)
                    .unwrap()
                    .scales
                    .set_sane(b, &mut || rng.unit());
            }
        }
    }
    w
}

/// Random activations with a spread of magnitudes per row.
pub fn random_acts(rng: &mut Rng, m: usize, k: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(m * k);
    for _ in 0..m {
        let s = 0.05 + 4.0 * rng.unit();
        for _ in 0..k {
            x.push(rng.normal() * s);
        }
    }
    x
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn read_bytes(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

pub fn read_f32(name: &str) -> Vec<f32> {
    read_bytes(name)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Decodes an activation row in dot format `dt` to f32 (written from the block layouts).
pub fn decode_activation(dt: lse_kernels::quant::DotType, b: &[u8], k: usize) -> Vec<f32> {
    use lse_kernels::quant::DotType::*;
    let h = |o: usize| f16::from_bits(u16::from_le_bytes([b[o], b[o + 1]])).to_f32();
    match dt {
        F32 => b
            .chunks_exact(4)
            .take(k)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        F16 => (0..k).map(|i| h(2 * i)).collect(),
        BF16 => (0..k)
            .map(|i| f32::from_bits((u16::from_le_bytes([b[2 * i], b[2 * i + 1]]) as u32) << 16))
            .collect(),
        Q8_0 => (0..k)
            .map(|i| h(34 * (i / 32)) * (b[34 * (i / 32) + 2 + i % 32] as i8) as f32)
            .collect(),
        Q8_1 => (0..k)
            .map(|i| h(36 * (i / 32)) * (b[36 * (i / 32) + 4 + i % 32] as i8) as f32)
            .collect(),
        Q8_K => (0..k)
            .map(|i| {
                let o = 292 * (i / 256);
                f32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
                    * (b[o + 4 + i % 256] as i8) as f32
            })
            .collect(),
    }
}

/// The value llama.cpp's dot defines, in f64 from the decoded operands: Σ w_i·x_i, except for
/// Q8_1 activations (Q4_1/Q5_1 weights) where the min term uses the block's stored
/// `s = f16(d·Σq)` as ggml does: Σ_b [Σ_i (w_i − m_b)·x_i + m_b·s_b].
/// Returns (value, Σ|w_i·x_i|).
pub fn reference_dot(t: GgmlType, wrow: &[u8], qx: &[u8], k: usize) -> (f64, f64) {
    let dt = lse_kernels::quant::dot_type(t).unwrap();
    let mut wd = vec![0f32; k];
    lse_kernels::dequantize_row(t, wrow, &mut wd);
    let xd = decode_activation(dt, qx, k);
    let mag: f64 = wd
        .iter()
        .zip(&xd)
        .map(|(a, b)| (*a as f64 * *b as f64).abs())
        .sum();
    let h =
        |b: &[u8], o: usize| f16::from_bits(u16::from_le_bytes([b[o], b[o + 1]])).to_f32() as f64;
    let v = if dt == lse_kernels::quant::DotType::Q8_1 {
        let wb = t.type_size();
        (0..k / 32)
            .map(|b| {
                let m = h(wrow, wb * b + 2);
                let s = h(qx, 36 * b + 2);
                (32 * b..32 * b + 32)
                    .map(|i| (wd[i] as f64 - m) * xd[i] as f64)
                    .sum::<f64>()
                    + m * s
            })
            .sum()
    } else {
        wd.iter().zip(&xd).map(|(a, b)| *a as f64 * *b as f64).sum()
    };
    (v, mag)
}

/// y[i][r] = scalar dot of weight row r with activation row i quantized alone.
pub fn reference_matmul(
    t: GgmlType,
    w: &[u8],
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
) -> Vec<f32> {
    let dt = dot_type(t).unwrap();
    let dot = scalar_dot_fn(t).unwrap();
    let rb = t.row_bytes(k).unwrap();
    let mut y = vec![0f32; m * n];
    for i in 0..m {
        let mut qx = vec![0u8; dt.row_bytes(k)];
        quantize_activation(dt, &x[i * k..(i + 1) * k], &mut qx);
        for r in 0..n {
            y[i * n + r] = dot(&w[r * rb..(r + 1) * rb], &qx);
        }
    }
    y
}

/// Σ|w_i·x_i| over decoded weight row `r` and the activation row `x`, in f32.
pub fn row_mag(t: GgmlType, w: &[u8], r: usize, k: usize, x: &[f32]) -> f32 {
    let rb = t.row_bytes(k).unwrap();
    let mut wd = vec![0f32; k];
    lse_kernels::dequantize_row(t, &w[r * rb..(r + 1) * rb], &mut wd);
    wd.iter().zip(x).map(|(a, b)| (a * b).abs()).sum()
}

/// The three test models that can be had, opened; prints which are skipped.
pub fn test_models() -> impl Iterator<Item = (&'static str, GgufFile)> {
    ["smollm2", "gemma3", "qwen25coder"]
        .into_iter()
        .filter_map(|name| {
            let Some(path) = lse_testdata::model(name) else {
                eprintln!("{name}: model unavailable, skipping");
                return None;
            };
            Some((name, GgufFile::open(&path).expect("open model")))
        })
}
