//! Sharded scoring and the exact merge, on a mock engine: N shards merged give the single run's
//! report (every field but the timings) bit for bit and its KL base byte for byte; the merge refuses
//! missing, duplicate, foreign, truncated and corrupted shards with one line.

use lse_eval::shard_file::ShardFile;
use lse_eval::{merge, run_with, MergeRequest, NoProgress, PerplexityInput, PerplexityRequest, Reduction, RowRequest, Scorer, ShardSpec};
use serde_json::Value;
use std::ops::Range;
use std::path::{Path, PathBuf};

const V: usize = 48;

struct Mock {
    phase: f64,
}

fn logit(phase: f64, tok: u32, pos: usize, i: usize) -> f32 {
    (2.0 * ((0.31 * i as f64) + 0.17 * tok as f64 + 0.029 * pos as f64 + phase).sin()
        + if i == (tok as usize * 5 + 1) % V { 2.5 } else { 0.0 }) as f32
}

impl Scorer for Mock {
    type Rows = Vec<(u32, usize)>;
    fn n_vocab(&self) -> usize {
        V
    }
    fn add_bos(&self) -> bool {
        true
    }
    fn bos_id(&self) -> Option<u32> {
        Some(1)
    }
    fn kv_capacity(&self) -> usize {
        4096
    }
    fn tokenize(&self, text: &str, add_special: bool) -> Vec<u32> {
        let mut v = if add_special { vec![1] } else { vec![] };
        v.extend(text.bytes().map(|b| 2 + (b as u32 % 43)));
        v
    }
    fn config_json(&self) -> Value {
        serde_json::json!({"device_arch": "mock", "prefill_attention_scale": 0.125})
    }
    fn model_json(&self) -> Value {
        serde_json::json!({"architecture": "mock", "name": "m"})
    }
    fn windows_per_pass(&self, _ctx: usize) -> usize {
        3
    }
    fn prefill(&self, input: &[u32], positions: &[usize]) -> lse_eval::error::Result<Self::Rows> {
        Ok(positions.iter().map(|&p| (input[p], p)).collect())
    }
    fn head_reduce(&self, rows: &Self::Rows, range: Range<usize>, reqs: &[RowRequest]) -> lse_eval::error::Result<Vec<Reduction>> {
        Ok(rows[range]
            .iter()
            .zip(reqs)
            .map(|(&(t, p), rq)| {
                let r: Vec<f32> = (0..V).map(|i| logit(self.phase, t, p, i)).collect();
                let (mut max, mut am) = (f32::NEG_INFINITY, 0);
                for (i, &x) in r.iter().enumerate() {
                    if x > max {
                        max = x;
                        am = i;
                    }
                }
                let mut idx: Vec<usize> = (0..V).collect();
                idx.sort_by(|&a, &b| r[b].total_cmp(&r[a]).then(a.cmp(&b)));
                Reduction {
                    max,
                    sum_exp: r.iter().map(|&x| ((x - max) as f64).exp()).sum(),
                    argmax: am as u32,
                    picked: rq.ids.iter().map(|&i| r[i as usize]).collect(),
                    top: idx[..rq.top_k].iter().map(|&i| (i as u32, r[i])).collect(),
                }
            })
            .collect())
    }
    fn head_logits(&self, rows: &Self::Rows, range: Range<usize>) -> lse_eval::error::Result<Vec<f32>> {
        Ok(rows[range].iter().flat_map(|&(t, p)| (0..V).map(move |i| logit(self.phase, t, p, i))).collect())
    }
}

fn text() -> String {
    (0..3000).map(|i| char::from(b'a' + ((i * 7 + i / 13) % 26) as u8)).collect()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lse-eval-shard-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn base_req(method: Option<lse_eval::Method>, stride: Option<usize>) -> PerplexityRequest {
    PerplexityRequest {
        input: PerplexityInput::Text(text()),
        method,
        ctx: Some(64),
        stride,
        chunks: Some(16),
        include_windows: true,
        include_token_ids: true,
        ..Default::default()
    }
}

/// The report without its timing fields, as text (every number exactly as printed).
fn numbers(mut v: Value) -> String {
    let o = v.as_object_mut().unwrap();
    for k in ["elapsed_seconds", "prefill_tokens_per_second"] {
        assert!(o.remove(k).is_some(), "{k}");
    }
    if let Some(Value::Array(ws)) = o.get_mut("windows") {
        for w in ws {
            w.as_object_mut().unwrap().remove("seconds");
        }
    }
    v.to_string()
}

fn shards(m: &Mock, req: &PerplexityRequest, d: &Path, tag: &str, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let out = d.join(format!("{tag}-{i}-of-{n}.shard"));
            let r = PerplexityRequest {
                shard: Some(ShardSpec { index: i, count: n }),
                shard_out: Some(out.clone()),
                model_sha256: Some("ab".repeat(32)),
                ..req.clone()
            };
            let v = run_with(m, &r, &mut NoProgress).unwrap();
            assert_eq!(v["object"], "lse.perplexity-shard");
            out
        })
        .collect()
}

#[test]
fn merged_shards_equal_the_single_run_bit_for_bit() {
    let d = dir("equal");
    let m = Mock { phase: 0.0 };
    let other = Mock { phase: 0.3 };
    for (mname, method, stride) in [("chunks", None, None), ("sliding", Some(lse_eval::Method::Sliding), Some(24))] {
        // a base from the other model, to compare against
        let cmp_base = d.join(format!("{mname}-ref.kld"));
        run_with(&other, &PerplexityRequest { kld_base_out: Some(cmp_base.clone()), kld_top_k: Some(8), ..base_req(method, stride) }, &mut NoProgress)
            .unwrap();
        for (kname, compare, record) in [("plain", false, false), ("record", false, true), ("compare+record", true, true)] {
            let single_base = d.join(format!("{mname}-{kname}-single.kld"));
            let mut req = base_req(method, stride);
            if compare {
                req.kld_base = Some(cmp_base.clone());
            }
            if record {
                req.kld_base_out = Some(single_base.clone());
                req.kld_top_k = Some(5);
            }
            let single = run_with(&m, &req, &mut NoProgress).unwrap();
            assert_eq!(single.get("kld").is_some(), compare);
            let want = numbers(single);
            for n in [1, 2, 3, 7] {
                let tag = format!("{mname}-{kname}");
                let paths = shards(&m, &req, &d, &tag, n);
                let merged_base = d.join(format!("{tag}-{n}-merged.kld"));
                let mreq = MergeRequest {
                    shards: paths.iter().rev().cloned().collect(),
                    kld_base_out: record.then(|| merged_base.clone()),
                    ..Default::default()
                };
                let got = numbers(merge(&mreq).unwrap());
                assert_eq!(got, want, "{tag}: {n} shards");
                if record {
                    assert_eq!(std::fs::read(&merged_base).unwrap(), std::fs::read(&single_base).unwrap(), "{tag}: base of {n} shards");
                }
            }
        }
    }
    std::fs::remove_dir_all(&d).unwrap();
}

fn refused(req: &MergeRequest, phrase: &str) -> String {
    let e = merge(req).err().unwrap_or_else(|| panic!("merge accepted {:?}", req.shards)).to_string();
    assert!(!e.contains('\n'), "{e}");
    assert!(e.contains(phrase), "{e:?} lacks {phrase:?}");
    e
}

fn rewrite(p: &Path, to: &Path, f: impl FnOnce(&mut ShardFile)) {
    let (_, mut s) = ShardFile::read(p).unwrap();
    f(&mut s);
    std::fs::write(to, s.to_bytes()).unwrap();
}

#[test]
fn merge_refuses_bad_shard_sets() {
    let d = dir("refuse");
    let m = Mock { phase: 0.0 };
    let req = base_req(None, None);
    let p = shards(&m, &req, &d, "a", 3);
    let mr = |v: Vec<PathBuf>| MergeRequest { shards: v, ..Default::default() };
    refused(&mr(vec![p[0].clone(), p[2].clone()]), "shard 1/3 is missing");
    refused(&mr(vec![p[0].clone()]), "shards 1/3, 2/3 are missing");
    refused(&mr(vec![p[0].clone(), p[1].clone(), p[1].clone(), p[2].clone()]), "shard 1/3 is given twice");
    // another plan (ctx), another shard count
    let q = shards(&m, &PerplexityRequest { ctx: Some(32), ..req.clone() }, &d, "b", 3);
    refused(&mr(vec![p[0].clone(), q[1].clone(), p[2].clone()]), "ctx is 64 in the first but 32");
    let r = shards(&m, &req, &d, "c", 2);
    refused(&mr(vec![p[0].clone(), r[1].clone(), p[2].clone()]), "shard_count is 3 in the first but 2");
    // another model, base, LSE version (rewritten with a valid checksum)
    let x = d.join("x.shard");
    rewrite(&p[1], &x, |s| s.model_sha256 = Some("cd".repeat(32)));
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "model_sha256 is");
    rewrite(&p[1], &x, |s| s.kld_base_sha256 = Some("ef".repeat(32)));
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "kld_base_sha256 is");
    rewrite(&p[1], &x, |s| s.lse_version = "0.0.1-other".into());
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "was written by LSE \"0.0.1-other\"");
    rewrite(&p[1], &x, |s| s.records.pop().map(|_| ()).unwrap());
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "does not hold windows");
    // truncated, corrupted, not a shard
    let bytes = std::fs::read(&p[1]).unwrap();
    std::fs::write(&x, &bytes[..bytes.len() - 100]).unwrap();
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "is truncated or corrupt");
    let mut bad = bytes.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x10;
    std::fs::write(&x, &bad).unwrap();
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "checksum does not match");
    std::fs::write(&x, b"hello").unwrap();
    refused(&mr(vec![p[0].clone(), x.clone(), p[2].clone()]), "is not a shard file");
    refused(&mr(vec![p[0].clone(), d.join("nope.shard"), p[2].clone()]), "cannot read shard file");
    // a base asked of shards that recorded none
    let mq = MergeRequest { shards: p.clone(), kld_base_out: Some(d.join("b.kld")), ..Default::default() };
    refused(&mq, "the shards recorded no KL base");
    assert!(!d.join("b.kld").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn shard_spec_syntax_and_environment() {
    let none = |_: &str| None;
    assert_eq!(ShardSpec::parse("2/7", none).unwrap(), ShardSpec { index: 2, count: 7 });
    for (s, phrase) in [("7/7", "below the count"), ("1/0", "at least 1"), ("3", "must be I/N"), ("a/2", "shard index"), ("auto", "neither")] {
        let e = ShardSpec::parse(s, none).unwrap_err().to_string();
        assert!(e.contains(phrase), "{s}: {e}");
    }
    let slurm = |k: &str| match k {
        "SLURM_ARRAY_TASK_ID" => Some("5".to_string()),
        "SLURM_ARRAY_TASK_MIN" => Some("1".to_string()),
        "SLURM_ARRAY_TASK_COUNT" => Some("7".to_string()),
        _ => None,
    };
    assert_eq!(ShardSpec::parse("auto", slurm).unwrap(), ShardSpec { index: 4, count: 7 });
    assert_eq!(ShardSpec::parse("auto/7", slurm).unwrap(), ShardSpec { index: 4, count: 7 });
    assert!(ShardSpec::parse("auto/6", slurm).unwrap_err().to_string().contains("has 7 tasks"));
    let k8s = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "2".to_string());
    assert_eq!(ShardSpec::parse("auto/3", k8s).unwrap(), ShardSpec { index: 2, count: 3 });
    assert!(ShardSpec::parse("auto", k8s).unwrap_err().to_string().contains("use auto/N"));
    assert!(ShardSpec::parse("auto/2", k8s).unwrap_err().to_string().contains("below the count"));
    // shares are contiguous, disjoint and complete
    for w in [0, 1, 5, 16, 17] {
        for n in 1..9 {
            let mut next = 0;
            for i in 0..n {
                let (a, b) = ShardSpec { index: i, count: n }.range(w);
                assert_eq!(a, next);
                next = b;
            }
            assert_eq!(next, w);
        }
    }
}

/// More shards than windows would leave shards empty, and merging needs every one: refused when
/// the shard runs (a 0/99999999999 shard was once written, and its merge aborted on the count).
#[test]
fn more_shards_than_windows_are_refused() {
    let d = dir("toomany");
    let m = Mock { phase: 0.0 };
    let req = base_req(None, None);
    let n = shards(&m, &req, &d, "all", 1);
    let windows = ShardFile::read(&n[0]).unwrap().1.meta.run.windows;
    for count in [windows + 1, 99_999_999_999] {
        let r = PerplexityRequest { shard: Some(ShardSpec { index: 0, count }), shard_out: Some(d.join("x.shard")), ..req.clone() };
        let e = run_with(&m, &r, &mut NoProgress).err().unwrap().to_string();
        assert!(e.contains(&format!("only {windows} windows")), "{e}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}
