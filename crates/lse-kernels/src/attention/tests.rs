use super::*;

/// Uniform in [-1, 1), advancing `seed` (the crate's test xorshift).
fn rng(seed: &mut u64) -> f32 {
    let mut r = crate::test_rng::Rng(*seed);
    let v = r.signed();
    *seed = r.0;
    v
}

/// f64 reference over f32 K/V rows: causal + window, GQA by h / group.
#[allow(clippy::too_many_arguments)]
fn reference(q: &[f32], k: &[f32], v: &[f32], n_q: usize, pos0: usize, nh: usize, hk: usize, dk: usize, dv: usize, scale: f32, window: Option<usize>) -> Vec<f32> {
    let group = nh / hk;
    let mut out = vec![0f32; n_q * nh * dv];
    for i in 0..n_q {
        let t = pos0 + i;
        for h in 0..nh {
            let g = h / group;
            let qr = &q[(i * nh + h) * dk..][..dk];
            let mut sc = Vec::new();
            for p in 0..=t {
                if let Some(w) = window {
                    if t - p >= w {
                        continue;
                    }
                }
                let kr = &k[(p * hk + g) * dk..][..dk];
                let dot: f64 = qr.iter().zip(kr).map(|(a, b)| *a as f64 * *b as f64).sum();
                sc.push((p, dot * scale as f64));
            }
            let m = sc.iter().fold(f64::NEG_INFINITY, |a, &(_, s)| a.max(s));
            let z: f64 = sc.iter().map(|&(_, s)| (s - m).exp()).sum();
            for &(p, s) in &sc {
                let w = (s - m).exp() / z;
                for d in 0..dv {
                    out[(i * nh + h) * dv + d] += (w * v[(p * hk + g) * dv + d] as f64) as f32;
                }
            }
        }
    }
    out
}

#[test]
fn flash_and_dense_match_reference() {
    let pool = ThreadPool::new(2);
    let mut s = 12345u64;
    for &(nh, hk, dk, dv, n_kv, n_q, window) in &[
        (4usize, 2usize, 16usize, 16usize, 100usize, 37usize, None),
        (4, 1, 32, 32, 200, 200, Some(32usize)),
        (3, 3, 64, 64, 70, 1, None),
        (8, 2, 8, 8, 300, 130, Some(100)),
        // tiled AVX-512 kernel shapes: head_dim 256 (Gemma 3), 80 (64 + 16 columns), 7 rows per group
        (4, 1, 256, 256, 150, 150, None),
        (6, 2, 80, 80, 90, 45, Some(20)),
        (14, 2, 64, 64, 77, 77, None),
        // keys in two chunks of 512, folded in the tile
        (4, 1, 64, 64, 700, 40, None),
        (6, 2, 32, 32, 600, 3, Some(400)),
    ] {
        let pos0 = n_kv - n_q;
        let q: Vec<f32> = (0..n_q * nh * dk).map(|_| rng(&mut s) * 2.0).collect();
        let k: Vec<f32> = (0..n_kv * hk * dk).map(|_| rng(&mut s) * 2.0).collect();
        let v: Vec<f32> = (0..n_kv * hk * dv).map(|_| rng(&mut s)).collect();
        let want = reference(&q, &k, &v, n_q, pos0, nh, hk, dk, dv, 0.3, window);
        let kb: Vec<u8> = k.iter().flat_map(|x| x.to_le_bytes()).collect();
        let vb: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let view = KvView { ty: GgmlType::F32, k: &kb, v: &vb, n_head_kv: hk, head_dim_k: dk, head_dim_v: dv, #[cfg(target_arch = "x86_64")] mirror: None };
        let shape = AttnShape { n_q, q_pos0: pos0, n_head: nh, scale: 0.3, window };
        for d in [Dialect::Scalar, Dialect::Simd] {
            for kind in [AttnKind::Flash, AttnKind::Dense] {
                let mut out = vec![0f32; n_q * nh * dv];
                attention(d, &pool, kind, &shape, &q, &view, &mut out).unwrap();
                let err = out.iter().zip(&want).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
                assert!(err < 2e-5, "{kind:?} {d:?} nh={nh} hk={hk} window={window:?}: max err {err}");
            }
        }
    }
}

#[test]
fn f16_cache_and_bad_shapes() {
    let pool = ThreadPool::new(1);
    let (nh, hk, dk, n) = (2usize, 1usize, 32usize, 10usize);
    let mut s = 7u64;
    let q: Vec<f32> = (0..n * nh * dk).map(|_| rng(&mut s)).collect();
    let k: Vec<f32> = (0..n * hk * dk).map(|_| rng(&mut s)).collect();
    let mut kb = vec![0u8; n * hk * dk * 2];
    for (r, b) in k.chunks(dk).zip(kb.chunks_mut(dk * 2)) {
        kv::store_row(GgmlType::F16, r, b);
    }
    let view = KvView { ty: GgmlType::F16, k: &kb, v: &kb, n_head_kv: hk, head_dim_k: dk, head_dim_v: dk, #[cfg(target_arch = "x86_64")] mirror: None };
    let shape = AttnShape { n_q: n, q_pos0: 0, n_head: nh, scale: 0.2, window: None };
    let mut out = vec![0f32; n * nh * dk];
    attention(Dialect::Simd, &pool, AttnKind::Flash, &shape, &q, &view, &mut out).unwrap();
    // query 0 sees only key 0: output = v row 0 (f16-rounded)
    let mut v0 = vec![0f32; dk];
    kv::load_row(GgmlType::F16, &kb[..dk * 2], &mut v0);
    for d in 0..dk {
        assert!((out[d] - v0[d]).abs() < 1e-6);
    }
    let bad = AttnShape { n_head: 3, ..shape };
    let mut out3 = vec![0f32; n * 3 * dk];
    assert!(attention(Dialect::Simd, &pool, AttnKind::Dense, &bad, &q, &view, &mut out3).is_err());
}

/// An f16 K and V cache of `n_kv` positions × `hk` heads of `dk` random values in [-1, 1).
fn f16_cache(n_kv: usize, hk: usize, dk: usize, seed: &mut u64) -> (Vec<u8>, Vec<u8>) {
    let mut kb = vec![0u8; n_kv * hk * dk * 2];
    let mut vb = vec![0u8; n_kv * hk * dk * 2];
    for b in kb.chunks_mut(dk * 2).chain(vb.chunks_mut(dk * 2)) {
        let r: Vec<f32> = (0..dk).map(|_| rng(seed)).collect();
        kv::store_row(GgmlType::F16, &r, b);
    }
    (kb, vb)
}

/// The tiled mirror of a whole [`f16_cache`].
#[cfg(target_arch = "x86_64")]
fn mirror_of(kb: &[u8], vb: &[u8], n_kv: usize, hk: usize, dk: usize) -> TiledMirror {
    let mut m = TiledMirror::new(hk, dk, dk);
    m.update(GgmlType::F16, kb, vb, dk * 2, dk * 2, 0, n_kv);
    m
}

/// A view of an f16 cache of `hk` heads of `dk` (K and V), without a mirror.
fn f16_view<'a>(kb: &'a [u8], vb: &'a [u8], hk: usize, dk: usize) -> KvView<'a> {
    KvView {
        ty: GgmlType::F16,
        k: kb,
        v: vb,
        n_head_kv: hk,
        head_dim_k: dk,
        head_dim_v: dk,
        #[cfg(target_arch = "x86_64")]
        mirror: None,
    }
}

/// Jobs sharing one `attention_batch` call give the bits each gives alone, whether or not its
/// cache keeps a mirror; a bad job is an error.
#[test]
fn batch_equals_lone_calls() {
    let pool = ThreadPool::new(2);
    let mut s = 99u64;
    let (nh, hk, dk) = (6usize, 2usize, 64usize);
    // (keys in the cache, query rows, mirror kept)
    let jobs = [(40usize, 1usize, true), (300, 1, true), (17, 17, false), (90, 3, true), (64, 20, false)];
    struct Cache {
        kb: Vec<u8>,
        vb: Vec<u8>,
        #[cfg(target_arch = "x86_64")]
        mirror: Option<TiledMirror>,
        q: Vec<f32>,
    }
    let caches: Vec<Cache> = jobs
        .iter()
        .map(|&(n_kv, n_q, keep)| {
            let (kb, vb) = f16_cache(n_kv, hk, dk, &mut s);
            #[cfg(target_arch = "x86_64")]
            let mirror = keep.then(|| mirror_of(&kb, &vb, n_kv, hk, dk));
            let _ = keep;
            let q = (0..n_q * nh * dk).map(|_| rng(&mut s)).collect();
            #[cfg(target_arch = "x86_64")]
            return Cache { kb, vb, mirror, q };
            #[cfg(not(target_arch = "x86_64"))]
            Cache { kb, vb, q }
        })
        .collect();
    fn view_of(c: &Cache, hk: usize, dk: usize) -> KvView<'_> {
        KvView {
        ty: GgmlType::F16,
        k: &c.kb,
        v: &c.vb,
        n_head_kv: hk,
        head_dim_k: dk,
        head_dim_v: dk,
        #[cfg(target_arch = "x86_64")]
        mirror: c.mirror.as_ref().map(|m| m.view()),
        }
    }
    let view = |c| view_of(c, hk, dk);
    let shape = |j: usize| AttnShape { n_q: jobs[j].1, q_pos0: jobs[j].0 - jobs[j].1, n_head: nh, scale: 0.125, window: if j == 3 { Some(50) } else { None } };
    for d in [Dialect::Scalar, Dialect::Simd] {
        let lone: Vec<Vec<f32>> = (0..jobs.len())
            .map(|j| {
                let mut out = vec![0f32; jobs[j].1 * nh * dk];
                attention(d, &pool, AttnKind::Flash, &shape(j), &caches[j].q, &view(&caches[j]), &mut out).unwrap();
                out
            })
            .collect();
        let mut outs: Vec<Vec<f32>> = jobs.iter().map(|j| vec![0f32; j.1 * nh * dk]).collect();
        let mut batch: Vec<AttnJob> = outs
            .iter_mut()
            .enumerate()
            .map(|(j, out)| AttnJob { shape: shape(j), q: &caches[j].q, kv: view(&caches[j]), out })
            .collect();
        attention_batch(d, &pool, AttnKind::Flash, &mut batch).unwrap();
        for j in 0..jobs.len() {
            assert!(outs[j].iter().zip(&lone[j]).all(|(a, b)| a.to_bits() == b.to_bits()), "{d:?} job {j}");
        }
        let mut short = vec![0f32; 1];
        let mut bad = [AttnJob { shape: shape(0), q: &caches[0].q, kv: view(&caches[0]), out: &mut short }];
        assert!(attention_batch(d, &pool, AttnKind::Flash, &mut bad).is_err());
    }
}

/// One KV head decoding (one unit for two threads, so its rows are cut in two tasks) gives the
/// bits one thread gives, with and without a mirror.
#[test]
fn row_split_keeps_bits() {
    let (one, two) = (ThreadPool::new(1), ThreadPool::new(2));
    let mut s = 7u64;
    let (nh, hk, dk, n_kv) = (4usize, 1usize, 256usize, 200usize);
    let (kb, vb) = f16_cache(n_kv, hk, dk, &mut s);
    #[cfg(target_arch = "x86_64")]
    let mirror = mirror_of(&kb, &vb, n_kv, hk, dk);
    let q: Vec<f32> = (0..nh * dk).map(|_| rng(&mut s)).collect();
    let shape = AttnShape { n_q: 1, q_pos0: n_kv - 1, n_head: nh, scale: 0.0625, window: None };
    for keep in [false, true] {
        #[allow(unused_mut)] // the mirror is x86_64's
        let mut kv = f16_view(&kb, &vb, hk, dk);
        #[cfg(target_arch = "x86_64")]
        {
            kv.mirror = keep.then(|| mirror.view());
        }
        let run = |pool: &ThreadPool| {
            let mut out = vec![f32::NAN; nh * dk];
            attention(Dialect::Simd, pool, AttnKind::Flash, &shape, &q, &kv, &mut out).unwrap();
            out
        };
        let (a, b) = (run(&one), run(&two));
        assert!(a.iter().all(|x| x.is_finite()), "mirror {keep}");
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()), "mirror {keep}");
    }
}

/// Decode rows whose keys a two-thread batch splits by chunks (three KV heads: two to four
/// chunks, windows starting inside a chunk) give the bits of the unsplit tile on one thread; so
/// do one KV head's, which the batch cuts by rows instead.
#[test]
fn chunk_split_keeps_bits() {
    let (one, two) = (ThreadPool::new(1), ThreadPool::new(2));
    let mut s = 11u64;
    for &(nh, hk, dk, n_kv, window) in &[(9usize, 3usize, 64usize, 777usize, None), (9, 3, 64, 600, Some(500usize)), (9, 3, 64, 1600, None), (9, 3, 64, 2000, Some(1100)), (4, 1, 256, 1100, None), (4, 1, 64, 1300, Some(600))] {
        let (kb, vb) = f16_cache(n_kv, hk, dk, &mut s);
        #[cfg(target_arch = "x86_64")]
        let mirror = mirror_of(&kb, &vb, n_kv, hk, dk);
        let q: Vec<f32> = (0..nh * dk).map(|_| 2.0 * rng(&mut s)).collect();
        let shape = AttnShape { n_q: 1, q_pos0: n_kv - 1, n_head: nh, scale: 0.125, window };
        #[allow(unused_mut)] // the mirror is x86_64's
        let mut kv = f16_view(&kb, &vb, hk, dk);
        #[cfg(target_arch = "x86_64")]
        {
            kv.mirror = Some(mirror.view());
        }
        let mut lone = vec![f32::NAN; nh * dk];
        attention(Dialect::Simd, &one, AttnKind::Flash, &shape, &q, &kv, &mut lone).unwrap();
        assert!(lone.iter().all(|x| x.is_finite()));
        for pool in [&one, &two] {
            let mut out = vec![f32::NAN; nh * dk];
            attention_batch(Dialect::Simd, pool, AttnKind::Flash, &mut [AttnJob { shape, q: &q, kv, out: &mut out }]).unwrap();
            let same = out.iter().zip(&lone).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} threads, {hk} kv heads, {n_kv} keys, window {window:?}", pool.threads());
        }
    }
}

/// Two decode jobs split by chunks in one three-thread dispatch (two KV heads each: 4 units on 3
/// threads; three chunks each, one windowed), beside a prefill job, give each job's lone bits.
#[cfg(target_arch = "x86_64")]
#[test]
fn split_jobs_share_a_dispatch() {
    let (one, three) = (ThreadPool::new(1), ThreadPool::new(3));
    let mut s = 23u64;
    let (nh, hk, dk) = (4usize, 2usize, 64usize);
    // (keys, query rows, window, mirror kept)
    let jobs = [(1200usize, 1usize, None, true), (1700, 1, Some(1000usize), true), (90, 5, None, false)];
    let caches: Vec<_> = jobs.iter().map(|&(n_kv, ..)| f16_cache(n_kv, hk, dk, &mut s)).collect();
    let mirrors: Vec<TiledMirror> = jobs.iter().zip(&caches).map(|(j, (kb, vb))| mirror_of(kb, vb, j.0, hk, dk)).collect();
    let qs: Vec<Vec<f32>> = jobs.iter().map(|j| (0..j.1 * nh * dk).map(|_| 2.0 * rng(&mut s)).collect()).collect();
    let view = |i: usize| {
        let mut kv = f16_view(&caches[i].0, &caches[i].1, hk, dk);
        kv.mirror = jobs[i].3.then(|| mirrors[i].view());
        kv
    };
    let shape = |i: usize| AttnShape { n_q: jobs[i].1, q_pos0: jobs[i].0 - jobs[i].1, n_head: nh, scale: 0.125, window: jobs[i].2 };
    let lone: Vec<Vec<f32>> = (0..jobs.len())
        .map(|i| {
            let mut out = vec![f32::NAN; jobs[i].1 * nh * dk];
            attention(Dialect::Simd, &one, AttnKind::Flash, &shape(i), &qs[i], &view(i), &mut out).unwrap();
            out
        })
        .collect();
    let mut outs: Vec<Vec<f32>> = jobs.iter().map(|j| vec![f32::NAN; j.1 * nh * dk]).collect();
    let mut batch: Vec<AttnJob> = outs.iter_mut().enumerate().map(|(i, out)| AttnJob { shape: shape(i), q: &qs[i], kv: view(i), out }).collect();
    attention_batch(Dialect::Simd, &three, AttnKind::Flash, &mut batch).unwrap();
    for i in 0..jobs.len() {
        assert!(lone[i].iter().all(|x| x.is_finite()), "job {i}");
        assert!(outs[i].iter().zip(&lone[i]).all(|(a, b)| a.to_bits() == b.to_bits()), "job {i}");
    }
}

/// The AVX2 micro-tile against the AVX-512 one, bit for bit: f32 and f16 panels, 1–4 rows,
/// windows that start and end inside panels, head dims with and without a 64-column block.
/// A micro-tile entry point over f32 and over f16 panels.
#[cfg(target_arch = "x86_64")]
type TileFns = (
    unsafe fn(&tiled::Rows, &tiled::Head<f32>, &mut [f32], &mut [&mut [f32]; tiled::RM], &mut [tiled::Softmax; tiled::RM]),
    unsafe fn(&tiled::Rows, &tiled::Head<u16>, &mut [f32], &mut [&mut [f32]; tiled::RM], &mut [tiled::Softmax; tiled::RM]),
);

/// Asserts that tiles `a` and `b` give the same bits on random panels of each (dk, dv) of
/// `shapes`, for 1 to 4 rows, several visible key ranges, f32 and f16 panels.
///
/// # Safety
/// The CPU must have the features of both tiles.
#[cfg(target_arch = "x86_64")]
unsafe fn assert_tiles_equal(a: TileFns, b: TileFns, shapes: &[(usize, usize)]) {
    use tiled::{Head, Rows, Softmax, KP, RM};
    let mut seed = 0x5eed_u64;
    for &(dk, dv) in shapes {
        let n_keys = 40 * KP;
        let kt: Vec<f32> = (0..n_keys * dk).map(|_| rng(&mut seed)).collect();
        let v: Vec<f32> = (0..n_keys * dv).map(|_| rng(&mut seed)).collect();
        let kt16: Vec<u16> = kt.iter().map(|&x| crate::fp::f32_to_f16(x)).collect();
        let v16: Vec<u16> = v.iter().map(|&x| crate::fp::f32_to_f16(x)).collect();
        let q: Vec<Vec<f32>> = (0..RM).map(|_| (0..dk).map(|_| 3.0 * rng(&mut seed)).collect()).collect();
        for n in 1..=RM {
            // the last two cross the chunk boundary (at panel 27 with panel 0 at absolute 5)
            for (first, last) in [(0usize, 7usize), (3, 40), (17, 79), (0, 79), (33, 33), (300, 620), (0, 639)] {
                let mut rows = Rows { q: [&[][..]; RM], last: [0; RM], first: [0; RM], n, lo_panel: 5, chunk: None };
                for (r, qr) in q.iter().enumerate().take(n) {
                    rows.q[r] = qr;
                    rows.last[r] = last - r.min(last - first);
                    rows.first[r] = first;
                }
                // `b` asks for its panels ahead (a hint: it moves no value)
                let run = |t: TileFns, half: bool, ahead: bool| {
                    let mut acc = vec![0f32; 2 * RM * dv];
                    let mut states = [Softmax::EMPTY; RM];
                    let mut outs_buf = vec![vec![f32::NAN; dv]; RM];
                    {
                        let mut outs: [&mut [f32]; RM] = Default::default();
                        for (o, b) in outs.iter_mut().zip(outs_buf.iter_mut()) {
                            *o = &mut b[..];
                        }
                        if half {
                            t.1(&rows, &Head { kt: &kt16, v: &v16, dk, dv, scale: 0.125, ahead }, &mut acc, &mut outs, &mut states);
                        } else {
                            t.0(&rows, &Head { kt: &kt, v: &v, dk, dv, scale: 0.125, ahead }, &mut acc, &mut outs, &mut states);
                        }
                    }
                    outs_buf.truncate(n);
                    outs_buf.iter().flatten().map(|x| x.to_bits()).collect::<Vec<u32>>()
                };
                for half in [false, true] {
                    let want = run(a, half, false);
                    assert!(want.iter().all(|&b| f32::from_bits(b).is_finite()));
                    assert_eq!(want, run(b, half, true), "dk {dk} dv {dv} n {n} keys {first}..={last} f16 {half}");
                }
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn tiled_avx2_equals_avx512() {
    if !crate::simd::avx512::available() {
        println!("no AVX-512 here: the AVX2 tile is checked against the reference through `attention`");
        return;
    }
    let avx512: TileFns = (tiled::micro_tile_avx512::<f32>, tiled::micro_tile_avx512::<u16>);
    let avx2: TileFns = (tiled::micro_tile_avx2::<f32>, tiled::micro_tile_avx2::<u16>);
    // SAFETY: AVX-512 checked above (AVX2, FMA and F16C come with it); dims multiples of 16.
    unsafe { assert_tiles_equal(avx512, avx2, &[(64, 64), (16, 48), (128, 80), (128, 128)]) }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn tiled_pipelined_equals_plain() {
    if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")) {
        return;
    }
    let piped: TileFns = (tiled::micro_tile_avx2::<f32>, tiled::micro_tile_avx2::<u16>);
    let plain: TileFns = (tiled::micro_tile_avx2_plain::<f32>, tiled::micro_tile_avx2_plain::<u16>);
    // SAFETY: the features checked above; dims multiples of 16 (dk = dv: the pipelined shapes).
    unsafe { assert_tiles_equal(piped, plain, &[(16, 16), (64, 64), (128, 128), (256, 256)]) }
}
