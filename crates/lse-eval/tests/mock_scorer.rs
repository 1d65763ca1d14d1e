//! The scoring loop against a mock engine whose logits are a closed-form function of
//! (token at the position, position, first input token). Every expected value here is computed
//! independently from that function and the SPEC's definitions, not from lse-eval's code.

use lse_eval::kld::LSE_MAGIC;
use lse_eval::{run_with, NoProgress, PerplexityInput, PerplexityRequest, Reduction, RowRequest, Scorer};
use serde_json::Value;
use std::cell::RefCell;
use std::ops::Range;

const V: usize = 64;
const BOS: u32 = 1;

struct Mock {
    add_bos: bool,
    phase: f64,
    kv: usize,
    calls: RefCell<Vec<(Vec<u32>, Vec<usize>)>>,
    blocks: RefCell<Vec<usize>>,
}

fn mock(add_bos: bool) -> Mock {
    Mock { add_bos, phase: 0.0, kv: 4096, calls: RefCell::new(vec![]), blocks: RefCell::new(vec![]) }
}

/// The mock's logit of id `i` at a row (as f32, like an engine's).
fn logit(phase: f64, tok: u32, pos: usize, first: u32, i: usize) -> f32 {
    let x = 2.5 * ((0.37 * i as f64) + 0.11 * tok as f64 + 0.013 * pos as f64 + phase).sin()
        + 0.8 * ((1.3 * i as f64) * (0.05 + 0.01 * first as f64)).cos()
        + if i == (tok as usize * 7 + 3) % V { 3.0 } else { 0.0 };
    x as f32
}

fn row(phase: f64, tok: u32, pos: usize, first: u32) -> Vec<f32> {
    (0..V).map(|i| logit(phase, tok, pos, first, i)).collect()
}

/// Independent f64 log-softmax of a row.
fn log_softmax(r: &[f32]) -> Vec<f64> {
    let m = r.iter().fold(f64::NEG_INFINITY, |a, &b| a.max(b as f64));
    let lse = m + r.iter().map(|&x| (x as f64 - m).exp()).sum::<f64>().ln();
    r.iter().map(|&x| x as f64 - lse).collect()
}

impl Scorer for Mock {
    type Rows = Vec<(u32, usize, u32)>;
    fn n_vocab(&self) -> usize {
        V
    }
    fn add_bos(&self) -> bool {
        self.add_bos
    }
    fn bos_id(&self) -> Option<u32> {
        Some(BOS)
    }
    fn kv_capacity(&self) -> usize {
        self.kv
    }
    fn tokenize(&self, text: &str, add_special: bool) -> Vec<u32> {
        let mut v = Vec::new();
        if add_special && self.add_bos {
            v.push(BOS);
        }
        v.extend(text.bytes().map(|b| 3 + (b as u32 % 61)));
        v
    }
    fn config_json(&self) -> Value {
        serde_json::json!({"device_arch": "mock", "head_rows": 128})
    }
    fn model_json(&self) -> Value {
        serde_json::json!({"architecture": "mock"})
    }
    fn prefill(&self, input: &[u32], positions: &[usize]) -> lse_eval::error::Result<Self::Rows> {
        self.calls.borrow_mut().push((input.to_vec(), positions.to_vec()));
        Ok(positions.iter().map(|&p| (input[p], p, input[0])).collect())
    }
    fn head_reduce(&self, rows: &Self::Rows, range: Range<usize>, requests: &[RowRequest]) -> lse_eval::error::Result<Vec<Reduction>> {
        assert!(range.len() <= 128);
        assert_eq!(range.len(), requests.len());
        self.blocks.borrow_mut().push(range.len());
        Ok(rows[range]
            .iter()
            .zip(requests)
            .map(|(&(t, p, f), rq)| {
                let r = row(self.phase, t, p, f);
                let (mut max, mut am) = (f32::NEG_INFINITY, 0);
                for (i, &x) in r.iter().enumerate() {
                    if x > max {
                        max = x;
                        am = i;
                    }
                }
                let sum_exp = r.iter().map(|&x| ((x - max) as f64).exp()).sum();
                let mut idx: Vec<usize> = (0..V).collect();
                idx.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
                Reduction {
                    max,
                    sum_exp,
                    argmax: am as u32,
                    picked: rq.ids.iter().map(|&i| r[i as usize]).collect(),
                    top: idx[..rq.top_k].iter().map(|&i| (i as u32, r[i])).collect(),
                }
            })
            .collect())
    }
    fn head_logits(&self, rows: &Self::Rows, range: Range<usize>) -> lse_eval::error::Result<Vec<f32>> {
        Ok(rows[range].iter().flat_map(|&(t, p, f)| row(self.phase, t, p, f)).collect())
    }
}

fn ids(n: usize, seed: u32) -> Vec<u32> {
    let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            2 + s % (V as u32 - 2)
        })
        .collect()
}

fn tmpdir(name: &str) -> lse_testdata::Tmp {
    lse_testdata::tmp("eval-mock", name)
}

/// Expected NLL of target `t` (absolute) scored in the window starting at `begin`.
fn expected_nll(m: &Mock, toks: &[u32], begin: usize, t: usize, bos_replace: bool) -> f64 {
    let first = if bos_replace { BOS } else { toks[begin] };
    let pos = t - 1 - begin;
    let tok_at = if pos == 0 { first } else { toks[t - 1] };
    -log_softmax(&row(m.phase, tok_at, pos, first))[toks[t] as usize]
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

fn req_tokens(t: Vec<u32>) -> PerplexityRequest {
    PerplexityRequest { input: PerplexityInput::Tokens(t), ..Default::default() }
}

fn sem(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| x * x).sum::<f64>() / n - m * m;
    (var / (n - 1.0)).sqrt()
}

#[test]
fn chunks_at_512_with_bos() {
    let m = mock(true);
    let toks = ids(2000, 1);
    let mut req = req_tokens(toks.clone());
    req.include_windows = true;
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["method"], "chunks");
    assert_eq!(rep["ctx"], 512);
    assert_eq!(rep["stride"], 512);
    assert_eq!(rep["windows_scored"], 3);
    assert_eq!(rep["scored_tokens"], 765);
    assert_eq!(rep["prefill_tokens"], 1536);
    // independent: chunk k, targets 257..511 inside it
    let mut nlls = vec![];
    for k in 0..3 {
        for j in 257..512 {
            nlls.push(expected_nll(&m, &toks, 512 * k, 512 * k + j, true));
        }
    }
    let mean = nlls.iter().sum::<f64>() / nlls.len() as f64;
    assert!(close(rep["mean_nll"].as_f64().unwrap(), mean, 1e-7), "{} vs {mean}", rep["mean_nll"]);
    assert!(close(rep["perplexity"].as_f64().unwrap(), mean.exp(), 1e-7));
    assert!(close(rep["perplexity_uncertainty"].as_f64().unwrap(), mean.exp() * sem(&nlls), 1e-5));
    let w = rep["windows"].as_array().unwrap();
    assert_eq!(w.len(), 3);
    for (k, win) in w.iter().enumerate() {
        assert_eq!(win["index"], k);
        assert_eq!(win["begin"], 512 * k);
        assert_eq!(win["end"], 512 * k + 512);
        assert_eq!(win["first_target"], 257);
        assert_eq!(win["scored"], 255);
        let s: f64 = nlls[255 * k..255 * (k + 1)].iter().sum();
        assert!(close(win["nll_sum"].as_f64().unwrap(), s, 1e-7));
    }
    // every chunk: input is the chunk with its first token replaced by BOS, positions 256..=510
    let calls = m.calls.borrow();
    assert_eq!(calls.len(), 3);
    for (k, (input, pos)) in calls.iter().enumerate() {
        assert_eq!(input.len(), 512);
        assert_eq!(input[0], BOS);
        assert_eq!(&input[1..], &toks[512 * k + 1..512 * k + 512]);
        assert_eq!(pos, &(256..511).collect::<Vec<_>>());
    }
    assert_eq!(*m.blocks.borrow(), vec![128, 127, 128, 127, 128, 127]);
}

#[test]
fn chunks_without_bos_feed_unchanged_and_limit() {
    let m = mock(false);
    let toks = ids(3000, 2);
    let mut req = req_tokens(toks.clone());
    req.ctx = Some(100);
    req.chunks = Some(4);
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["windows_scored"], 4);
    assert_eq!(rep["scored_tokens"], 4 * 49);
    for (k, (input, _)) in m.calls.borrow().iter().enumerate() {
        assert_eq!(input, &toks[100 * k..100 * k + 100].to_vec());
    }
    let mut s = 0.0;
    for k in 0..4 {
        for j in 51..100 {
            s += expected_nll(&m, &toks, 100 * k, 100 * k + j, false);
        }
    }
    assert!(close(rep["mean_nll"].as_f64().unwrap(), s / 196.0, 1e-7));
}

#[test]
fn report_keys_in_spec_order() {
    let m = mock(false);
    let dir = tmpdir("keys");
    let base = dir.join("b.kld");
    let mut req = req_tokens(ids(600, 3));
    req.ctx = Some(128);
    req.kld_base_out = Some(base.clone());
    run_with(&m, &req, &mut NoProgress).unwrap();
    let mut req = req_tokens(ids(600, 3));
    req.ctx = Some(128);
    req.kld_base = Some(base);
    req.include_windows = true;
    req.include_token_ids = true;
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    let keys: Vec<&str> = rep.as_object().unwrap().keys().map(|s| s.as_str()).collect();
    assert_eq!(
        keys,
        [
            "object", "tokens", "token_ids_sha256", "token_ids", "method", "ctx", "stride", "windows_scored",
            "scored_tokens", "mean_nll", "perplexity", "perplexity_uncertainty", "elapsed_seconds", "prefill_tokens",
            "prefill_tokens_per_second", "config", "kld", "windows"
        ]
    );
    let kk: Vec<&str> = rep["kld"].as_object().unwrap().keys().map(|s| s.as_str()).collect();
    assert_eq!(
        kk,
        [
            "base", "top_k", "tokens", "base_perplexity", "perplexity", "delta_perplexity", "perplexity_ratio",
            "mean_log_ratio", "mean_log_ratio_uncertainty", "mean_kld", "mean_kld_uncertainty", "kld_p99", "kld_max",
            "same_top", "same_top_uncertainty", "mean_delta_p", "mean_delta_p_uncertainty", "rms_delta_p",
            "mean_base_top_mass"
        ]
    );
    let wk: Vec<&str> = rep["windows"][0].as_object().unwrap().keys().map(|s| s.as_str()).collect();
    assert_eq!(wk, ["index", "begin", "end", "first_target", "scored", "nll_sum", "mean_nll", "perplexity", "seconds"]);
    assert_eq!(rep["object"], "lse.perplexity");
    assert_eq!(rep["token_ids"].as_array().unwrap().len(), 600);
    // plain run has neither kld, windows nor token_ids
    let rep = run_with(&m, &{
        let mut r = req_tokens(ids(600, 3));
        r.ctx = Some(128);
        r
    }, &mut NoProgress)
    .unwrap();
    assert!(rep.get("kld").is_none() && rep.get("windows").is_none() && rep.get("token_ids").is_none());
}

#[test]
#[allow(clippy::needless_range_loop)]
fn sliding_256_96_over_1000() {
    let m = mock(true);
    let toks = ids(1000, 4);
    let mut req = req_tokens(toks.clone());
    req.method = Some(lse_eval::Method::Sliding);
    req.ctx = Some(256);
    req.stride = Some(96);
    req.include_windows = true;
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["scored_tokens"], 999);
    assert_eq!(rep["stride"], 96);
    // each target after the first is scored exactly once, by the earliest window that holds it
    // at an index >= 1; windows per SPEC §3.4
    let mut count = vec![0; 1000];
    let mut expect_sum = 0.0;
    for w in rep["windows"].as_array().unwrap() {
        let (b, e, ft) = (w["begin"].as_u64().unwrap() as usize, w["end"].as_u64().unwrap() as usize, w["first_target"].as_u64().unwrap() as usize);
        let i = w["index"].as_u64().unwrap() as usize;
        assert_eq!(b, i * 96);
        assert_eq!(e, (i * 96 + 256).min(1000));
        for t in b + ft..e {
            count[t] += 1;
            let earliest = (0..).find(|&k| k * 96 < t && t < k * 96 + 256).unwrap();
            assert_eq!(earliest, i, "target {t}");
            if i > 0 {
                assert!(t - b >= 256 - 96);
            }
            expect_sum += expected_nll(&m, &toks, b, t, true);
        }
    }
    assert_eq!(count[0], 0);
    assert!(count[1..].iter().all(|&c| c == 1));
    assert!(close(rep["mean_nll"].as_f64().unwrap(), expect_sum / 999.0, 1e-7));
    for (input, _) in m.calls.borrow().iter() {
        assert_eq!(input[0], BOS);
    }
}

#[test]
fn text_input_and_too_short() {
    let m = mock(true);
    let text = "abc".repeat(400); // 1200 bytes -> 1201 ids with BOS
    let mut req = PerplexityRequest { input: PerplexityInput::Text(text), ..Default::default() };
    req.ctx = Some(300);
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["tokens"], 1201);
    assert_eq!(rep["windows_scored"], 4);
    req.ctx = Some(601);
    let e = run_with(&m, &req, &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("1201") && e.contains("1202"), "{e}");
}

#[test]
fn token_ids_out_of_range_refused() {
    let m = mock(false);
    let mut t = ids(2000, 5);
    t[77] = V as u32;
    let e = run_with(&m, &req_tokens(t), &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("64") && e.contains("index 77"), "{e}");
    assert!(m.calls.borrow().is_empty());
}

#[test]
fn window_larger_than_kv_refused() {
    let mut m = mock(false);
    m.kv = 256;
    let e = run_with(&m, &req_tokens(ids(2000, 6)), &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("512") && e.contains("256") && e.contains("--kv-len"), "{e}");
    assert!(m.calls.borrow().is_empty());
}

/// The base's top-K of a row, computed independently: f64 log-softmax, sorted by logit then id.
fn top_k_of(r: &[f32], k: usize) -> Vec<(usize, f64)> {
    let lp = log_softmax(r);
    let mut idx: Vec<usize> = (0..V).collect();
    idx.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
    idx[..k].iter().map(|&i| (i, lp[i])).collect()
}

#[test]
fn lse_base_round_trip_and_kld_against_independent_math() {
    let dir = tmpdir("roundtrip");
    let base = dir.join("base.kld");
    let toks = ids(1500, 7);
    let a = mock(true);
    let mut req = req_tokens(toks.clone());
    req.ctx = Some(200);
    req.kld_base_out = Some(base.clone());
    let rep_a = run_with(&a, &req, &mut NoProgress).unwrap();
    let scored = rep_a["scored_tokens"].as_u64().unwrap();
    assert_eq!(scored, 7 * 99);
    // file = magic + u32 + header padded to 8 + 264 bytes per scored token
    let bytes = std::fs::read(&base).unwrap();
    assert_eq!(&bytes[..8], LSE_MAGIC);
    let h = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let start = (12 + h).div_ceil(8) * 8;
    assert_eq!(bytes.len(), start + 264 * scored as usize);
    assert!(bytes[12 + h..start].iter().all(|&b| b == 0));
    let header: Value = serde_json::from_slice(&bytes[12..12 + h]).unwrap();
    let hk: Vec<&str> = header.as_object().unwrap().keys().map(|s| s.as_str()).collect();
    assert_eq!(
        hk,
        ["format", "version", "token_ids_sha256", "tokens", "method", "ctx", "stride", "chunks", "windows", "scored_tokens", "top_k", "n_vocab", "perplexity", "model", "config"]
    );
    assert_eq!(header["format"], "lse.kld-base");
    assert_eq!(header["top_k"], 32);
    assert_eq!(header["chunks"], Value::Null);
    assert_eq!(header["token_ids_sha256"], rep_a["token_ids_sha256"]);
    assert_eq!(header["perplexity"], rep_a["perplexity"]);
    // first record = first scored token of chunk 0: nll and the top 32, best first
    let r0 = row(0.0, toks[100], 100, BOS);
    let nll0 = f64::from_le_bytes(bytes[start..start + 8].try_into().unwrap());
    assert!(close(nll0, -log_softmax(&r0)[toks[101] as usize], 1e-9));
    for (j, (id, lp)) in top_k_of(&r0, 32).into_iter().enumerate() {
        let o = start + 8 + 8 * j;
        assert_eq!(u32::from_le_bytes(bytes[o..o + 4].try_into().unwrap()) as usize, id);
        assert!((f32::from_le_bytes(bytes[o + 4..o + 8].try_into().unwrap()) as f64 - lp).abs() < 1e-5);
    }

    // same settings, same model: KLD 0, same top 1
    let mut req = req_tokens(toks.clone());
    req.ctx = Some(200);
    req.kld_base = Some(base.clone());
    let rep = run_with(&a, &req, &mut NoProgress).unwrap();
    let k = &rep["kld"];
    assert!(k["mean_kld"].as_f64().unwrap().abs() < 1e-7, "{k}");
    assert_eq!(k["same_top"], 1.0);
    assert_eq!(k["tokens"], scored);
    assert_eq!(k["top_k"], 32);
    assert!(close(k["base_perplexity"].as_f64().unwrap(), rep_a["perplexity"].as_f64().unwrap(), 1e-12));
    assert!(k["mean_log_ratio"].as_f64().unwrap().abs() < 1e-12);

    // a perturbed model: every statistic against independent math
    let mut b = mock(true);
    b.phase = 0.2;
    let rep = run_with(&b, &req, &mut NoProgress).unwrap();
    let k = &rep["kld"];
    let (mut klds, mut lr, mut dp, mut same, mut mass, mut bn) = (vec![], vec![], vec![], 0, 0.0, vec![]);
    for c in 0..7 {
        for j in 101..200 {
            let t = 200 * c + j;
            let tok_at = if j - 1 == 0 { BOS } else { toks[t - 1] };
            let ra = row(0.0, tok_at, j - 1, BOS);
            let rb = row(0.2, tok_at, j - 1, BOS);
            let (la, lb) = (log_softmax(&ra), log_softmax(&rb));
            let top = top_k_of(&ra, 32);
            let pt: f64 = top.iter().map(|&(_, l)| l.exp()).sum();
            let qt: f64 = top.iter().map(|&(i, _)| lb[i].exp()).sum();
            let kl = top.iter().map(|&(i, l)| l.exp() * (l - lb[i])).sum::<f64>() + (1.0 - pt) * ((1.0 - pt).ln() - (1.0 - qt).ln());
            klds.push(kl);
            let (na, nb) = (-la[toks[t] as usize], -lb[toks[t] as usize]);
            bn.push(na);
            lr.push(nb - na);
            dp.push((-nb).exp() - (-na).exp());
            let argmax_b = (0..V).fold(0, |m, i| if rb[i] > rb[m] { i } else { m });
            same += (argmax_b == top[0].0) as usize;
            mass += pt;
        }
    }
    let n = klds.len() as f64;
    let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
    let f = |key: &str| k[key].as_f64().unwrap();
    assert!(close(f("mean_kld"), mean(&klds), 1e-4), "{} vs {}", f("mean_kld"), mean(&klds));
    assert!(close(f("mean_kld_uncertainty"), sem(&klds), 1e-3));
    let mut sorted = klds.clone();
    sorted.sort_by(f64::total_cmp);
    let p = 0.99 * (n - 1.0);
    let (lo, w) = (p.floor() as usize, p - p.floor());
    let p99 = (1.0 - w) * sorted[lo] + w * sorted[lo + 1];
    assert!(close(f("kld_p99"), p99, 1e-3), "{} vs {p99}", f("kld_p99"));
    assert!(close(f("kld_max"), *sorted.last().unwrap(), 1e-4));
    assert!(close(f("base_perplexity"), mean(&bn).exp(), 1e-6));
    assert!(close(f("mean_log_ratio"), mean(&lr), 1e-5));
    assert!(close(f("mean_log_ratio_uncertainty"), sem(&lr), 1e-4));
    assert!(close(f("perplexity_ratio"), mean(&lr).exp(), 1e-6));
    assert!((f("delta_perplexity") - (f("perplexity") - mean(&bn).exp())).abs() < 1e-6 * f("perplexity"));
    let st = same as f64 / n;
    assert!(close(f("same_top"), st, 1e-12));
    assert!(close(f("same_top_uncertainty"), (st * (1.0 - st) / (n - 1.0)).sqrt(), 1e-9));
    assert!(close(f("mean_delta_p"), mean(&dp), 1e-4));
    assert!(close(f("rms_delta_p"), (dp.iter().map(|x| x * x).sum::<f64>() / n).sqrt(), 1e-4));
    assert!(close(f("mean_base_top_mass"), mass / n, 1e-6));
    assert!(f("mean_kld") > 1e-3, "perturbation should show");
}

#[test]
fn lse_base_mismatches_name_the_field() {
    let dir = tmpdir("mismatch");
    let base = dir.join("base.kld");
    let m = mock(false);
    let toks = ids(2000, 8);
    let mut req = req_tokens(toks.clone());
    req.method = Some(lse_eval::Method::Sliding);
    req.ctx = Some(256);
    req.stride = Some(128);
    req.chunks = Some(5);
    req.kld_base_out = Some(base.clone());
    run_with(&m, &req, &mut NoProgress).unwrap();
    req.kld_base_out = None;
    req.kld_base = Some(base.clone());
    // identical settings are accepted
    run_with(&m, &req, &mut NoProgress).unwrap();
    let n_calls = m.calls.borrow().len();
    let check = |r: &PerplexityRequest, field: &str, a: &str, b: &str| {
        let e = run_with(&m, r, &mut NoProgress).unwrap_err().to_string();
        assert!(e.contains(field) && e.contains(a) && e.contains(b), "{field}: {e}");
    };
    let mut r = req.clone();
    r.ctx = Some(200);
    check(&r, "ctx", "256", "200");
    let mut r = req.clone();
    r.stride = Some(64);
    check(&r, "stride", "128", "64");
    let mut r = req.clone();
    r.chunks = None;
    check(&r, "chunks", "5", "null");
    let mut r = req.clone();
    r.method = None;
    r.stride = None;
    check(&r, "method", "sliding", "chunks");
    let mut r = req.clone();
    let mut other = toks.clone();
    other[1999] = if other[1999] == 5 { 6 } else { 5 };
    r.input = PerplexityInput::Tokens(other);
    check(&r, "token_ids_sha256", "", "");
    let mut r = req.clone();
    r.input = PerplexityInput::Tokens(toks[..1999].to_vec());
    check(&r, "tokens", "2000", "1999");
    assert_eq!(m.calls.borrow().len(), n_calls, "no model work on a mismatch");

    // truncated
    let bytes = std::fs::read(&base).unwrap();
    let trunc = dir.join("trunc.kld");
    std::fs::write(&trunc, &bytes[..bytes.len() - 100]).unwrap();
    let mut r = req.clone();
    r.kld_base = Some(trunc);
    let e = run_with(&m, &r, &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("truncated or corrupt"), "{e}");
    // a non-base file
    let junk = dir.join("junk.kld");
    std::fs::write(&junk, b"{\"hello\": 1}\n").unwrap();
    r.kld_base = Some(junk);
    let e = run_with(&m, &r, &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("not a KLD base"), "{e}");
    // values no softmax gives, in the last record (264 bytes: an f64 NLL, 32 × (u32 id, f32 log p))
    let edit = |name: &str, at: usize, with: &[u8]| {
        let mut b = bytes.clone();
        let o = b.len() - 264 + at;
        b[o..o + with.len()].copy_from_slice(with);
        let f = dir.join(name);
        std::fs::write(&f, b).unwrap();
        let mut r = req.clone();
        r.kld_base = Some(f);
        run_with(&m, &r, &mut NoProgress).unwrap_err().to_string()
    };
    let e = edit("nan.kld", 0, &f64::NAN.to_le_bytes());
    let header = 12 + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let last = (bytes.len() - header.div_ceil(8) * 8) / 264 - 1;
    assert!(e.contains(&format!("is corrupt: scored token {last} (in window 4) has an NLL of NaN")), "{e}");
    let e = edit("neg.kld", 0, &(-3.0f64).to_le_bytes());
    assert!(e.contains("NLL of -3"), "{e}");
    let e = edit("pos.kld", 12, &2.5f32.to_le_bytes());
    assert!(e.contains("log-probability of 2.5"), "{e}");
    // the second id overwritten by the third: a token counted twice
    let o = bytes.len() - 264;
    let third = u32::from_le_bytes(bytes[o + 24..o + 28].try_into().unwrap());
    let e = edit("dup.kld", 16, &third.to_le_bytes());
    assert!(e.contains(&format!("lists token id {third} twice among its top 32")), "{e}");
    // an id past the vocabulary
    let e = edit("vocab.kld", 16, &u32::MAX.to_le_bytes());
    assert!(e.contains(&format!("scored token {last} (in window 4) lists token id {} among its top 32, outside the vocabulary of", u32::MAX)), "{e}");
}

/// Writes a llama.cpp `_logits_` base (reference §4) from full logits rows, with this test's own
/// quantizer; returns the dequantized log-probs per row.
fn write_llama_base(path: &std::path::Path, ctx: usize, toks: &[u32], rows: &[Vec<f32>]) -> Vec<Vec<f32>> {
    let n_chunk = rows.len() / (ctx - 1 - ctx / 2);
    let mut out = Vec::new();
    out.extend_from_slice(b"_logits_");
    out.extend_from_slice(&(ctx as i32).to_le_bytes());
    out.extend_from_slice(&(V as i32).to_le_bytes());
    out.extend_from_slice(&(n_chunk as i32).to_le_bytes());
    for &t in &toks[..n_chunk * ctx] {
        out.extend_from_slice(&t.to_le_bytes());
    }
    let mut deq = Vec::new();
    for r in rows {
        let mx = r.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let mn = r.iter().cloned().fold(f32::INFINITY, f32::min).max(mx - 16.0);
        let s: f64 = r.iter().map(|&x| (x - mx).exp() as f64).sum();
        let l = s.ln() as f32;
        let min_log_prob = mn - mx - l;
        let scale = (mx - mn) / 65535.0;
        out.extend_from_slice(&scale.to_le_bytes());
        out.extend_from_slice(&min_log_prob.to_le_bytes());
        let inv = 1.0 / scale;
        let mut d = Vec::new();
        for &x in r {
            let q = if x > mn { (inv * (x - mn)).round_ties_even().clamp(0.0, 65535.0) as u16 } else { 0 };
            out.extend_from_slice(&q.to_le_bytes());
            d.push(scale * q as f32 + min_log_prob);
        }
        deq.push(d);
    }
    std::fs::write(path, out).unwrap();
    deq
}

#[test]
fn llama_cpp_base_is_read_and_compared() {
    let dir = tmpdir("llama");
    let path = dir.join("base.logits");
    let ctx = 64;
    let toks = ids(300, 9);
    let n_chunk = 3;
    // base = model A (BOS-replaced chunks), compare = model B
    let mut rows = vec![];
    let mut targets = vec![];
    for c in 0..n_chunk {
        for j in ctx / 2..ctx - 1 {
            let tok_at = if j == 0 { BOS } else { toks[c * ctx + j] };
            rows.push(row(0.0, tok_at, j, BOS));
            targets.push((tok_at, j, toks[c * ctx + j + 1]));
        }
    }
    let deq = write_llama_base(&path, ctx, &toks, &rows);
    let mut b = mock(true);
    b.phase = 0.15;
    let mut req = req_tokens(toks.clone());
    req.ctx = Some(ctx);
    req.kld_base = Some(path.clone());
    let rep = run_with(&b, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["windows_scored"], 3, "chunk count comes from the base");
    let k = &rep["kld"];
    assert_eq!(k["top_k"], V);
    let (mut klds, mut same, mut bn) = (vec![], 0, vec![]);
    for (d, &(tok_at, j, tgt)) in deq.iter().zip(&targets) {
        let lq = log_softmax(&row(0.15, tok_at, j, BOS));
        let kl: f64 = (0..V).filter(|&i| d[i] > -16.0).map(|i| (d[i] as f64).exp() * (d[i] as f64 - lq[i])).sum();
        klds.push(kl);
        bn.push(-(d[tgt as usize] as f64));
        let ib = (0..V).fold(0, |m, i| if d[i] > d[m] { i } else { m });
        let iq = (0..V).fold(0, |m, i| if lq[i] > lq[m] { i } else { m });
        same += (ib == iq) as usize;
    }
    let n = klds.len() as f64;
    let mk = klds.iter().sum::<f64>() / n;
    assert!(close(k["mean_kld"].as_f64().unwrap(), mk, 1e-4), "{} vs {mk}", k["mean_kld"]);
    assert!(close(k["base_perplexity"].as_f64().unwrap(), (bn.iter().sum::<f64>() / n).exp(), 1e-6));
    assert!(close(k["same_top"].as_f64().unwrap(), same as f64 / n, 1e-12));
    // the same model against its own llama.cpp base: only the 16-bit storage noise remains
    let a = mock(true);
    let rep = run_with(&a, &req, &mut NoProgress).unwrap();
    assert!(rep["kld"]["mean_kld"].as_f64().unwrap().abs() < 1e-6, "{}", rep["kld"]);
    assert_eq!(rep["kld"]["same_top"], 1.0);
    // other ctx, other ids, sliding: refused
    let mut r = req.clone();
    r.ctx = Some(32);
    assert!(run_with(&a, &r, &mut NoProgress).unwrap_err().to_string().contains("ctx"));
    let mut r = req.clone();
    let mut t2 = toks.clone();
    t2[70] = if t2[70] == 9 { 10 } else { 9 };
    r.input = PerplexityInput::Tokens(t2);
    let e = run_with(&a, &r, &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("index 70"), "{e}");
    let mut r = req.clone();
    r.method = Some(lse_eval::Method::Sliding);
    assert!(run_with(&a, &r, &mut NoProgress).unwrap_err().to_string().contains("method"));
    // truncated
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 2]).unwrap();
    assert!(run_with(&a, &req, &mut NoProgress).unwrap_err().to_string().contains("truncated or corrupt"));
}

#[test]
fn pairs_score_only_responses() {
    let m = mock(true);
    let recs = vec![
        lse_eval::PairRecord { prompt: "Hello".into(), response: " hi".into(), line: 1 },
        lse_eval::PairRecord { prompt: "Q".into(), response: "Answer here".into(), line: 3 },
    ];
    let mut req = PerplexityRequest { input: PerplexityInput::Pairs(recs.clone()), ..Default::default() };
    req.include_windows = true;
    let rep = run_with(&m, &req, &mut NoProgress).unwrap();
    assert_eq!(rep["method"], "pairs");
    assert_eq!(rep["ctx"], 1 + 1 + 11); // longest: BOS + "Q" + "Answer here"
    assert_eq!(rep["scored_tokens"], 3 + 11);
    let mut s = 0.0;
    let mut begin = 0;
    for r in &recs {
        let mut t = m.tokenize(&r.prompt, true);
        let p = t.len();
        t.extend(m.tokenize(&r.response, false));
        for i in p..t.len() {
            let tok_at = t[i - 1];
            s += -log_softmax(&row(0.0, tok_at, i - 1, t[0]))[t[i] as usize];
        }
        assert_eq!(rep["windows"][if begin == 0 { 0 } else { 1 }]["first_target"], p);
        begin += t.len();
    }
    assert!(close(rep["mean_nll"].as_f64().unwrap(), s / 14.0, 1e-7));
    // a record too long for the KV capacity: refused with its line number
    let mut small = mock(true);
    small.kv = 10;
    let e = run_with(&small, &req, &mut NoProgress).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("13"), "{e}");
    // nothing to score: the message names the field at fault
    let no_bos = mock(false);
    let pairs = |p: &str, r: &str| {
        let recs = vec![lse_eval::PairRecord { prompt: p.into(), response: r.into(), line: 2 }];
        run_with(&no_bos, &PerplexityRequest { input: PerplexityInput::Pairs(recs), ..Default::default() }, &mut NoProgress)
    };
    let e = pairs("", "x").unwrap_err().to_string();
    assert!(e.contains("the prompt of pairs line 2 is empty and the model adds no BOS"), "{e}");
    let e = pairs("Q", "").unwrap_err().to_string();
    assert!(e.contains("every record's response is empty"), "{e}");
    assert_eq!(pairs("", "xy").unwrap()["scored_tokens"], 1);
}

#[test]
fn request_from_json() {
    let v: Value = serde_json::from_str(
        r#"{"tokens":[1,2,3],"method":"sliding","ctx":64,"stride":16,"chunks":2,"kld_top_k":8,"kld_base_out":"b.kld","include_windows":true}"#,
    )
    .unwrap();
    let r = PerplexityRequest::from_json(&v).unwrap();
    assert_eq!(r.input, PerplexityInput::Tokens(vec![1, 2, 3]));
    assert_eq!((r.ctx, r.stride, r.chunks, r.kld_top_k, r.include_windows), (Some(64), Some(16), Some(2), Some(8), true));
    for (bad, phrase) in [
        (r#"{"text":"a","method":"nope"}"#, "chunks, sliding"),
        (r#"{"text":"a","kld_top_k":33}"#, "between 1 and 32"),
        (r#"{"text":"a","kld_top_k":8}"#, "only applies when writing a KL base with --perplexity-kld-base-out"),
        (r#"{"text":"a","method":"sliding","ctx":10,"stride":11}"#, "stride"),
        (r#"{"text":"a","tokens":[1]}"#, "exactly one"),
        (r#"{"text":"a","bogus":1}"#, "bogus"),
        (r#"{"pairs":[{"prompt":"a"}]}"#, "response"),
        // 2 × ctx wrapped in the too-short message
        (r#"{"text":"a","ctx":18446744073709551615}"#, "beyond any context"),
        (r#"{"text":"a","shard":{"index":0,"count":2,"extra":1},"shard_out":"s"}"#, "unknown field shard.extra"),
        (r#"{"text":"a","shard":{"index":0,"count":2},"shard_out":"s","model_sha256":"xyz"}"#, "model_sha256 must be 64 hex digits"),
    ] {
        let e = PerplexityRequest::from_json(&serde_json::from_str(bad).unwrap()).unwrap_err().to_string();
        assert!(e.contains(phrase), "{bad}: {e}");
    }
    // upper-case hex (PowerShell's Get-FileHash) is the same fingerprint
    let v = serde_json::json!({"text": "a", "shard": {"index": 0, "count": 2}, "shard_out": "s", "model_sha256": "AB".repeat(32)});
    assert_eq!(PerplexityRequest::from_json(&v).unwrap().model_sha256, Some("ab".repeat(32)));
}

#[test]
fn text_files_are_read_as_specified() {
    let dir = tmpdir("text");
    let p = dir.join("t.txt");
    std::fs::write(&p, b"line\r\n\n\n").unwrap();
    assert_eq!(lse_eval::read_text_file(&p).unwrap(), "line\r\n\n");
    assert_eq!(lse_eval::read_text_file_verbatim(&p).unwrap(), "line\r\n\n\n");
    std::fs::write(&p, b"ok\xe2\x82\xac then bad \xff\xfe").unwrap();
    let e = lse_eval::read_text_file(&p).unwrap_err().to_string();
    assert!(e.contains("offset 15") && e.contains("UTF-8"), "{e}");
    let q = dir.join("pairs.jsonl");
    std::fs::write(&q, "{\"prompt\":\"a\",\"response\":\"b\"}\n\n{\"prompt\":\"a\"}\n").unwrap();
    let e = lse_eval::read_pairs_file(&q).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("response"), "{e}");
    std::fs::write(&q, "{\"prompt\":\"a\",\"response\":\"b\"}\nnot json\n").unwrap();
    assert!(lse_eval::read_pairs_file(&q).unwrap_err().to_string().contains("line 2"));
    let t = dir.join("t.json");
    std::fs::write(&t, "[1, 2, -3]").unwrap();
    assert!(lse_eval::read_tokens_file(&t).unwrap_err().to_string().contains("element 2"));
}
