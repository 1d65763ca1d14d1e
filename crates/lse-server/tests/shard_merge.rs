//! `--perplexity-shard I/N` and `--perplexity-merge` on real models: 16 chunks of 128 tokens, without
//! (SmolLM2) and with a KL base compared and recorded (SmolLM2, Gemma-3); N = 1, 3, 7 shards (one,
//! uneven splits of 5–6 and 2–3 chunks) merged give the single run's report (every field but the
//! timings, as printed) and its base byte for byte.
//! The merge refuses a missing shard, a duplicate, another plan, model or base, a truncated or
//! corrupted shard, with one line and a non-zero exit.


use lse_testdata::Tmp;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lse-server");

fn run(args: &[String]) -> std::process::Output {
    Command::new(BIN).args(args).env_remove("SLURM_ARRAY_TASK_ID").env_remove("JOB_COMPLETION_INDEX").output().expect("run lse-server")
}

fn ok(args: &[String]) -> String {
    let o = run(args);
    assert!(o.status.success(), "lse-server {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn refused(args: &[String], phrase: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: stderr is not one line: {err:?}");
    assert!(lines[0].starts_with("lse-server: ") && lines[0].contains(phrase), "{args:?}: {:?} lacks {phrase:?}", lines[0]);
    assert!(!err.contains("panicked") && !err.contains("internal error"), "{err}");
}

fn s(v: &[&str]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

fn p(x: &Path) -> String {
    x.to_string_lossy().into_owned()
}

/// The report as printed, less the timing fields (elapsed, tokens per second, each window's seconds).
pub fn numbers(report: &Path) -> String {
    let text = std::fs::read_to_string(report).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.contains("\"elapsed_seconds\"") || line.contains("\"prefill_tokens_per_second\"") {
            continue;
        }
        let line = match line.find(",\"seconds\":") {
            Some(i) => format!("{}{}", &line[..i], &line[line[i..].find('}').map_or(line.len(), |j| i + j)..]),
            None => line.to_string(),
        };
        out.push_str(&line);
        out.push('\n');
    }
    assert!(out.contains("\"mean_nll\""), "{text}");
    out
}

/// The first ~24 KB of wikitext-2 (more than 16 chunks of 128 tokens), so each process tokenizes little.
fn text(dir: &Path) -> PathBuf {
    let b = std::fs::read(lse_testdata::data("wiki.test.raw")).unwrap();
    let mut end = 24_000.min(b.len());
    while end < b.len() && b[end] != b'\n' {
        end += 1;
    }
    let f = dir.join("wiki-head.txt");
    std::fs::write(&f, &b[..end]).unwrap();
    f
}

struct Plan {
    common: Vec<String>,
}

impl Plan {
    fn new(model: &Path, text: &Path) -> Plan {
        let c = ["--model", &p(model), "--perplexity", &p(text), "--perplexity-ctx", "128", "--perplexity-chunks", "16"];
        let mut common = s(&c);
        common.extend(s(&["--perplexity-windows", "--perplexity-token-ids", "--quiet"]));
        Plan { common }
    }
    fn args(&self, extra: &[String], more: &[&str]) -> Vec<String> {
        let mut a = self.common.clone();
        a.extend(extra.iter().cloned());
        a.extend(s(more));
        a
    }
    /// Runs the N shards (as separate processes) and returns their files, last first.
    fn shards(&self, extra: &[String], dir: &Path, tag: &str, n: usize) -> Vec<String> {
        let mut files = Vec::new();
        for i in (0..n).rev() {
            let f = p(&dir.join(format!("{tag}-{i}-of-{n}.lseshard")));
            let out = ok(&self.args(extra, &["--perplexity-shard", &format!("{i}/{n}"), "--perplexity-output", &f]));
            assert!(out.contains("\"object\":\"lse.perplexity-shard\""), "{out}");
            files.push(f);
        }
        files
    }
}

fn merge(files: &[String], more: &[&str]) -> Vec<String> {
    let mut a = s(&["--perplexity-merge"]);
    a.extend(files.iter().cloned());
    a.extend(s(more));
    a
}

/// The N = 1, 3, 7 matrix for one model (the plain case only when `plain`: the KL case's reports
/// hold the same numbers and more); returns the 3 shards of the KL case for refusal tests.
fn matrix(name: &str, dir: &Tmp, plain: bool) -> Option<(Plan, Vec<String>, Vec<String>)> {
    let model = lse_testdata::model(name)?;
    let text = text(dir);
    let plan = Plan::new(&model, &text);
    // a base to compare against: the same model with an f32 KV cache (KLD small but not zero)
    let reference = p(&dir.join("reference.kld"));
    ok(&plan.args(&[], &["--kv-cache-dtype", "f32", "--perplexity-kld-base-out", &reference, "--perplexity-kld-top-k", "16"]));
    let mut kl_shards = Vec::new();
    for (case, compare) in [("plain", false), ("kl", true)] {
        if !plain && !compare {
            continue;
        }
        let single_base = p(&dir.join(format!("{case}-single.kld")));
        let extra_for = |base_out: &str| -> Vec<String> {
            let mut e = Vec::new();
            if compare {
                e.extend(s(&["--perplexity-kld", &reference, "--perplexity-kld-base-out", base_out, "--perplexity-kld-top-k", "8"]));
            }
            e
        };
        let single = dir.join(format!("{case}-single.json"));
        ok(&plan.args(&extra_for(&single_base), &["--perplexity-output", &p(&single)]));
        let want = numbers(&single);
        assert_eq!(want.contains("\"kld\""), compare, "{want}");
        for n in [1, 3, 7] {
            let merged_base = p(&dir.join(format!("{case}-{n}.kld")));
            let files = plan.shards(&extra_for(&merged_base), dir, case, n);
            let merged = dir.join(format!("{case}-{n}.json"));
            ok(&merge(&files, &["--perplexity-output", &p(&merged)]));
            assert_eq!(numbers(&merged), want, "{name} {case}: {n} shards merged differ from the single run");
            if compare {
                let a = std::fs::read(&single_base).unwrap();
                assert_eq!(std::fs::read(&merged_base).unwrap(), a, "{name} {case}: the base of {n} shards differs");
                eprintln!("{name} {case} N={n}: report and {}-byte base identical", a.len());
                if n == 3 {
                    kl_shards = files.clone();
                }
            } else {
                eprintln!("{name} {case} N={n}: report identical");
            }
        }
    }
    let kl_extra = s(&["--perplexity-kld", &reference, "--perplexity-kld-top-k", "8"]);
    Some((plan, kl_extra, kl_shards))
}

#[test]
fn smollm2_shards_merge_bit_for_bit_and_bad_sets_are_refused() {
    let dir = lse_testdata::tmp("shard", "smollm2");
    let Some((plan, _kl_extra, files)) = matrix("smollm2", &dir, true) else { return };
    // files: shard 2, 1, 0 of 3 (KL case, base recorded)
    let d = |f: &str| p(&dir.join(f));
    refused(&merge(&[files[0].clone(), files[2].clone()], &[]), "shard 1/3 is missing");
    refused(&merge(&[files[0].clone(), files[1].clone(), files[1].clone(), files[2].clone()], &[]), "shard 1/3 is given twice");
    // another plan: ctx 64
    let at = plan.common.iter().position(|a| a == "--perplexity-ctx").unwrap();
    let mut plain64 = plan.args(&[], &["--perplexity-shard", "1/3", "--perplexity-output", &d("ctx64.lseshard")]);
    plain64[at + 1] = "64".into();
    ok(&plain64);
    refused(&merge(&[files[0].clone(), d("ctx64.lseshard"), files[2].clone()], &[]), "are not of one plan");
    // another base compared against: the merged base of the N = 1 run (same plan, another file)
    let base2 = d("kl-1.kld");
    ok(&plan.args(&s(&["--perplexity-kld", &base2, "--perplexity-kld-top-k", "8"]), &[
        "--perplexity-kld-base-out",
        &d("unused.kld"),
        "--perplexity-shard",
        "1/3",
        "--perplexity-output",
        &d("otherbase.lseshard"),
    ]));
    refused(&merge(&[files[0].clone(), d("otherbase.lseshard"), files[2].clone()], &[]), "kld_base is");
    // another model: Gemma's shard 1/3 of the same text
    if let Some(gemma) = lse_testdata::model("gemma3") {
        let mut g = plan.args(&[], &["--perplexity-shard", "1/3", "--perplexity-output", &d("gemma.lseshard")]);
        let m = g.iter().position(|a| a == "--model").unwrap();
        g[m + 1] = p(&gemma);
        ok(&g);
        refused(&merge(&[files[0].clone(), d("gemma.lseshard"), files[2].clone()], &[]), "model_sha256 is");
    }
    // truncated, corrupted
    let bytes = std::fs::read(&files[1]).unwrap();
    std::fs::write(d("cut.lseshard"), &bytes[..bytes.len() / 2]).unwrap();
    refused(&merge(&[files[0].clone(), d("cut.lseshard"), files[2].clone()], &[]), "truncated or corrupt");
    let mut bad = bytes.clone();
    let i = bad.len() / 3;
    bad[i] ^= 1;
    std::fs::write(d("flip.lseshard"), &bad).unwrap();
    refused(&merge(&[files[0].clone(), d("flip.lseshard"), files[2].clone()], &[]), "checksum does not match");
    // options that the shards fix, and shard runs without a file
    refused(&merge(&files, &["--perplexity-ctx", "64"]), "does not apply to --perplexity-merge");
    refused(&plan.args(&[], &["--perplexity-shard", "0/2"]), "needs --perplexity-output");
    refused(&plan.args(&[], &["--perplexity-shard", "auto", "--perplexity-output", &d("x")]), "neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX");
    // nothing was written by the refusals
    assert!(!dir.join("x").exists());
}

#[test]
fn gemma3_shards_merge_bit_for_bit() {
    let dir = lse_testdata::tmp("shard", "gemma3");
    let _ = matrix("gemma3", &dir, false);
}
