//! KV-cache row formats: storing f32 rows in the cache dtype and reading them back as f32.

use crate::fp::{bf16_to_f32, f16_to_f32, f32_to_bf16};
use lse_gguf::GgmlType;

const Q8_BLOCK: usize = 32;
const Q8_BYTES: usize = 34;

/// Whether `t` can hold KV rows of `n` elements.
pub fn kv_type_supported(t: GgmlType, n: usize) -> bool {
    match t {
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => true,
        GgmlType::Q8_0 => n.is_multiple_of(Q8_BLOCK),
        _ => false,
    }
}

/// Bytes of one row of `n` elements in `t` (None for an unsupported type or length).
pub fn kv_row_bytes(t: GgmlType, n: usize) -> Option<usize> {
    if !kv_type_supported(t, n) {
        return None;
    }
    t.row_bytes(n)
}

/// Stores `src` (f32) into `dst` in type `t`.
pub fn store_row(t: GgmlType, src: &[f32], dst: &mut [u8]) {
    match t {
        GgmlType::F32 => {
            for (x, b) in src.iter().zip(dst.chunks_exact_mut(4)) {
                b.copy_from_slice(&x.to_le_bytes());
            }
        }
        // the activations' f16 converter: eight at a time where the level has F16C, same bits
        GgmlType::F16 => crate::simd::quantize_activation(crate::simd::level(), crate::simd::ActLayout::Ggml, crate::quant::DotType::F16, src, dst),
        GgmlType::BF16 => {
            for (x, b) in src.iter().zip(dst.chunks_exact_mut(2)) {
                b.copy_from_slice(&f32_to_bf16(*x).to_le_bytes());
            }
        }
        GgmlType::Q8_0 => quantize_q8_0(src, dst),
        _ => {}
    }
}

/// Reads a row of `dst.len()` elements of type `t` as f32.
pub fn load_row(t: GgmlType, src: &[u8], dst: &mut [f32]) {
    match t {
        GgmlType::F32 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *y = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
        }
        GgmlType::F16 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *y = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        GgmlType::BF16 => {
            for (y, b) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *y = bf16_to_f32(u16::from_le_bytes([b[0], b[1]]));
            }
        }
        GgmlType::Q8_0 => {
            for (blk, y) in src.chunks_exact(Q8_BYTES).zip(dst.chunks_exact_mut(Q8_BLOCK)) {
                let d = f16_to_f32(u16::from_le_bytes([blk[0], blk[1]]));
                for j in 0..Q8_BLOCK {
                    y[j] = d * (blk[2 + j] as i8) as f32;
                }
            }
        }
        _ => dst.fill(f32::NAN),
    }
}

/// Q8_0 rows as llama.cpp's CPU `from_float` writes them (the activation quantizer).
fn quantize_q8_0(src: &[f32], dst: &mut [u8]) {
    crate::quant::q8_0::quantize(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_each_type() {
        let src: Vec<f32> = (0..64).map(|i| (i as f32 - 31.5) * 0.37).collect();
        for (t, tol) in [(GgmlType::F32, 0.0), (GgmlType::F16, 1e-2), (GgmlType::BF16, 0.1), (GgmlType::Q8_0, 0.1)] {
            let mut b = vec![0u8; kv_row_bytes(t, 64).unwrap()];
            store_row(t, &src, &mut b);
            let mut back = vec![0f32; 64];
            load_row(t, &b, &mut back);
            for (x, y) in src.iter().zip(&back) {
                assert!((x - y).abs() <= tol, "{t:?}: {x} -> {y}");
            }
        }
        assert!(kv_row_bytes(GgmlType::Q8_0, 16).is_none());
    }

    /// An f16 row stores `half`'s bits for every kind of value: ties, values that round to
    /// infinity, subnormals, signed zeros, infinities and NaNs; lengths with a tail.
    #[test]
    fn f16_row_equals_per_value_conversion() {
        let mut rng = crate::test_rng::Rng::new(0x2545_f491);
        let mut x: Vec<f32> = (0..1000).map(|_| f32::from_bits((rng.next() >> 32) as u32)).collect();
        x.extend([0.0, -0.0, 1.0 + 2f32.powi(-11), 65520.0, -65519.0, 6e-8, 3e-5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
        for n in [x.len(), 13, 7, 0] {
            let mut b = vec![0u8; 2 * n];
            store_row(GgmlType::F16, &x[..n], &mut b);
            for (v, h) in x[..n].iter().zip(b.chunks_exact(2)) {
                assert_eq!(u16::from_le_bytes([h[0], h[1]]), half::f16::from_f32(*v).to_bits(), "{v:e}");
            }
        }
    }
}
