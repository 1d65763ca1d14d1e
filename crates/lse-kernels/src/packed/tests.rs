//! The AVX2 tile against the VNNI tile, bit for bit, on random and on extreme blocks (every
//! quant at its largest magnitude, activations all ±max: the i16 bounds of `avx2.rs`).

use super::saturate::{saturate_acts, saturate_weights};
use super::{PackedMatrix, PACKED_TYPES};
use crate::test_rng::Rng;
use crate::{matmul_packed, GgmlType, ThreadPool};

/// The f16 scale fields of one block of `t`.
fn scale_fields(t: GgmlType) -> &'static [usize] {
    match t {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        _ => unreachable!(),
    }
}

fn weights(rng: &mut Rng, t: GgmlType, n: usize, k: usize, extreme: bool) -> Vec<u8> {
    let mut w: Vec<u8> = (0..n * t.row_bytes(k).unwrap()).map(|_| rng.byte()).collect();
    for blk in w.chunks_exact_mut(t.type_size()) {
        for &o in scale_fields(t) {
            let d = crate::fp::f32_to_f16(0.002 + 0.01 * rng.unit());
            blk[o..o + 2].copy_from_slice(&d.to_le_bytes());
        }
    }
    if extreme {
        saturate_weights(t, &mut w);
    }
    w
}

fn acts(rng: &mut Rng, m: usize, k: usize, extreme: bool) -> Vec<f32> {
    let mut x: Vec<f32> = (0..m * k).map(|_| 3.0 * rng.signed()).collect();
    if extreme {
        saturate_acts(&mut x);
    }
    x
}

#[test]
fn avx2_tile_equals_vnni_tile() {
    if !(crate::simd::avx512::available() && crate::packed::packed_available()) {
        println!("no AVX-512 VNNI here: the AVX2 tile is checked against scalar in tests/packed_avx2.rs");
        return;
    }
    let pool = ThreadPool::new(2);
    let mut rng = Rng::new(5);
    for t in PACKED_TYPES {
        for extreme in [false, true] {
            for (n, m, k) in [(16usize, 1usize, 256usize), (20, 3, 256), (16, 4, 256), (37, 9, 512), (13, 5, 256), (24, 8, 768), (48, 19, 256), (40, 130, 256), (270, 130, 256), (270, 130, 2560)] {
                let w = weights(&mut rng, t, n, k, extreme);
                let x = acts(&mut rng, m, k, extreme);
                let mut p = PackedMatrix::new(&pool, t, &w, n, k).unwrap();
                let mut y512 = vec![f32::NAN; m * n];
                matmul_packed(&pool, &p, &x, m, &mut y512);
                p.set_vnni(false);
                let mut y2 = vec![f32::NAN; m * n];
                matmul_packed(&pool, &p, &x, m, &mut y2);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert!(y512.iter().all(|v| v.is_finite()), "{} non-finite", t.name());
                assert_eq!(bits(&y2), bits(&y512), "{} {n}x{m}x{k} extreme={extreme}", t.name());
            }
        }
    }
}

/// `matmul_packed_many` over `ws` equals one `matmul_packed` per matrix, bit for bit, for each
/// activation row count.
fn many_equals_separate(pool: &ThreadPool, rng: &mut Rng, ws: &[PackedMatrix], k: usize, rows: &[usize]) {
    for &m in rows {
        let x = acts(rng, m, k, false);
        let mut outs: Vec<Vec<f32>> = ws.iter().map(|w| vec![f32::NAN; m * w.n()]).collect();
        {
            let mut ys: Vec<&mut [f32]> = outs.iter_mut().map(|o| &mut o[..]).collect();
            crate::matmul_packed_many(pool, &ws.iter().collect::<Vec<_>>(), &x, m, &mut ys);
        }
        for (w, got) in ws.iter().zip(&outs) {
            let mut want = vec![f32::NAN; m * w.n()];
            matmul_packed(pool, w, &x, m, &mut want);
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(got), bits(&want), "{w:?} m {m}");
        }
    }
}

#[test]
fn many_matrices_equal_separate_calls() {
    if !crate::packed::packed_available() {
        return;
    }
    let pool = ThreadPool::new(2);
    let mut rng = Rng::new(11);
    let k = 512;
    for t in PACKED_TYPES {
        let ws: Vec<PackedMatrix> =
            [48usize, 13, 200].iter().map(|&n| PackedMatrix::new(&pool, t, &weights(&mut rng, t, n, k, false), n, k).unwrap()).collect();
        many_equals_separate(&pool, &mut rng, &ws, k, &[1, 7, 33]);
    }
    // every packed type in one call, then Q5_0 again (sharing the first one's quantized rows)
    let types = PACKED_TYPES.iter().copied().chain([GgmlType::Q5_0]);
    let ws: Vec<PackedMatrix> =
        types.enumerate().map(|(i, t)| PackedMatrix::new(&pool, t, &weights(&mut rng, t, 16 + 9 * i, k, false), 16 + 9 * i, k).unwrap()).collect();
    many_equals_separate(&pool, &mut rng, &ws, k, &[1, 2, 8, 70]);
}

/// Packed bytes per weight, counted from the layout: quants, then f16 scales (and mins) per
/// 32-block for the block formats; the k-quants' scale bytes per block plus a header of f32 per
/// 8 blocks and 16 rows (Q4_K: `sc` and `m`, `d` and `−dmin`; Q6_K: two `sc`, `d`).
#[test]
fn packed_bytes_per_weight() {
    if !crate::packed::packed_available() {
        return;
    }
    let pool = ThreadPool::new(1);
    let (n, k) = (64usize, 512usize);
    let per_weight = |t: GgmlType| -> f64 {
        match t {
            GgmlType::Q4_0 => 0.5 + 2.0 / 32.0,
            GgmlType::Q4_1 => 0.5 + 4.0 / 32.0,
            GgmlType::Q5_0 => 0.625 + 2.0 / 32.0,
            GgmlType::Q5_1 => 0.625 + 4.0 / 32.0,
            GgmlType::Q8_0 => 1.0 + 2.0 / 32.0,
            GgmlType::Q4_K => 0.5 + 2.0 / 32.0 + 8.0 / 256.0,
            GgmlType::Q6_K => 0.75 + 2.0 / 32.0 + 4.0 / 256.0,
            _ => unreachable!(),
        }
    };
    let mut rng = Rng::new(3);
    for t in PACKED_TYPES {
        let p = PackedMatrix::new(&pool, t, &weights(&mut rng, t, n, k, false), n, k).unwrap();
        assert_eq!(p.size_bytes() as f64, per_weight(t) * (n * k) as f64, "{}", t.name());
    }
}

/// A copy packed into a [`crate::pages::HugeArena`] holds the bytes of one packed into its own
/// vector, and two copies from one arena do not overlap; one past the arena's room gets a vector.
#[test]
fn arena_copies_equal_own_copies() {
    if !crate::packed::packed_available() {
        return;
    }
    let pool = ThreadPool::new(2);
    let mut rng = Rng::new(11);
    let (n, k) = (40usize, 512usize);
    // 2 MiB: room for the small copies, not for the last one
    let arena = crate::pages::HugeArena::new(2 << 20).expect("an arena");
    let bytes = |p: &PackedMatrix| unsafe { std::slice::from_raw_parts(p.ptr(), p.size_bytes()) }.to_vec();
    let mut held = Vec::new();
    for t in PACKED_TYPES {
        let w = weights(&mut rng, t, n, k, false);
        let own = PackedMatrix::new(&pool, t, &w, n, k).unwrap();
        let in_arena = PackedMatrix::new_releasing(&pool, t, &w, n, k, crate::pages::Pages::Huge(Some(&arena)), &|_| {}).unwrap();
        assert!(matches!(in_arena.data, super::Data::Arena { .. }), "{t:?}");
        assert_eq!(bytes(&own), bytes(&in_arena), "{t:?}");
        held.push((bytes(&own), in_arena));
    }
    for (want, p) in &held {
        assert_eq!(&bytes(p), want, "a later copy wrote over an earlier one");
    }
    let w = weights(&mut rng, GgmlType::Q8_0, 4096, 512, false);
    let big = PackedMatrix::new_releasing(&pool, GgmlType::Q8_0, &w, 4096, 512, crate::pages::Pages::Huge(Some(&arena)), &|_| {}).unwrap();
    assert!(matches!(big.data, super::Data::Own(_)), "past the arena's room");
}
