//! deploy/: the Slurm job array and the Kubernetes Indexed Job run as they would on a cluster, one
//! process per task with the scheduler's variables (SLURM_ARRAY_TASK_* per task from the script's
//! `#SBATCH --array`; JOB_COMPLETION_INDEX with the manifest's command and env), then the merge
//! step; the merged report and base equal a single run's.


use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lse-server");
const PPL_ARGS: &str = "--perplexity-ctx 128 --perplexity-chunks 8 --perplexity-windows";

fn repo() -> PathBuf {
    lse_testdata::repo_root()
}

fn text(dir: &Path) -> PathBuf {
    let b = std::fs::read(lse_testdata::data("wiki.test.raw")).unwrap();
    let f = dir.join("text.txt");
    let mut end = 16_000.min(b.len());
    while end < b.len() && b[end] != b'\n' {
        end += 1;
    }
    std::fs::write(&f, &b[..end]).unwrap();
    f
}

/// A command with no scheduler variables but `env`.
fn cmd(program: &str, args: &[String], env: &BTreeMap<String, String>) -> Command {
    let mut c = Command::new(program);
    c.args(args).current_dir(repo());
    for k in ["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP", "JOB_COMPLETION_INDEX", "LSE_SHARDS"] {
        c.env_remove(k);
    }
    c.envs(env);
    c
}

fn ok(mut c: Command) {
    let o = c.output().unwrap();
    assert!(o.status.success(), "{c:?} failed: {}", String::from_utf8_lossy(&o.stderr));
}

/// The single run of the same settings: its report (less timings) and base.
fn single(model: &Path, text: &Path, dir: &Path) -> (String, Vec<u8>) {
    let (out, base) = (dir.join("single.json"), dir.join("single.kld"));
    let mut a: Vec<String> = ["--model", model.to_str().unwrap(), "--perplexity", text.to_str().unwrap(), "--quiet"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.extend(PPL_ARGS.split(' ').map(String::from));
    a.extend(["--perplexity-kld-base-out".into(), base.to_string_lossy().into(), "--perplexity-output".into(), out.to_string_lossy().into()]);
    ok(cmd(BIN, &a, &BTreeMap::new()));
    (numbers(&out), std::fs::read(&base).unwrap())
}

fn numbers(p: &Path) -> String {
    let t = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let v: Vec<String> = t
        .lines()
        .filter(|l| !l.contains("\"elapsed_seconds\"") && !l.contains("\"prefill_tokens_per_second\""))
        .map(|l| match l.find(",\"seconds\":") {
            Some(i) => l[..i].to_string(),
            None => l.to_string(),
        })
        .collect();
    v.join("\n")
}

fn base_env(model: &Path, text: &Path, out: &Path) -> BTreeMap<String, String> {
    let mut e = BTreeMap::new();
    e.insert("LSE_SERVER".into(), BIN.into());
    e.insert("LSE_MODEL".into(), model.to_string_lossy().into());
    e.insert("LSE_TEXT".into(), text.to_string_lossy().into());
    e.insert("LSE_OUT_DIR".into(), out.to_string_lossy().into());
    e.insert("LSE_PPL_ARGS".into(), PPL_ARGS.into());
    e.insert("LSE_KLD_BASE_OUT".into(), out.join("base.kld").to_string_lossy().into());
    e
}

#[test]
fn slurm_job_array_then_merge_equals_a_single_run() {
    let Some(model) = lse_testdata::model("smollm2") else { return };
    let dir = lse_testdata::tmp("deploy", "slurm");
    let text = text(&dir);
    let (want, want_base) = single(&model, &text, &dir);
    let script = repo().join("deploy/slurm/perplexity-shards.sbatch");
    let body = std::fs::read_to_string(&script).unwrap();
    let range = body.lines().find_map(|l| l.strip_prefix("#SBATCH --array=")).expect("#SBATCH --array=A-B");
    let (a, b) = range.trim().split_once('-').unwrap();
    let (a, b): (usize, usize) = (a.parse().unwrap(), b.parse().unwrap());
    let out = dir.join("shared");
    let mut env = base_env(&model, &text, &out);
    env.insert("SLURM_SUBMIT_DIR".into(), repo().to_string_lossy().into());
    for id in a..=b {
        let mut e = env.clone();
        e.insert("SLURM_ARRAY_TASK_ID".into(), id.to_string());
        e.insert("SLURM_ARRAY_TASK_MIN".into(), a.to_string());
        e.insert("SLURM_ARRAY_TASK_MAX".into(), b.to_string());
        e.insert("SLURM_ARRAY_TASK_COUNT".into(), (b - a + 1).to_string());
        ok(cmd("bash", &[script.to_string_lossy().into()], &e));
    }
    ok(cmd("bash", &[repo().join("deploy/slurm/perplexity-merge.sbatch").to_string_lossy().into()], &env));
    assert_eq!(numbers(&out.join("report.json")), want);
    assert_eq!(std::fs::read(out.join("base.kld")).unwrap(), want_base);
    eprintln!("slurm: {} tasks merged equal the single run", b - a + 1);
}

/// `command: [...]` (a JSON array), `completions: N` and the container's `- name:` / `value:` pairs.
fn manifest(path: &Path) -> (Vec<String>, Option<usize>, BTreeMap<String, String>) {
    let body = std::fs::read_to_string(path).unwrap();
    let mut command: Vec<String> = Vec::new();
    let mut completions = None;
    let mut env = BTreeMap::new();
    let mut name: Option<String> = None;
    for l in body.lines().map(str::trim) {
        if let Some(c) = l.strip_prefix("command:") {
            command = serde_json::from_str(c.trim()).expect("command is a flow list of strings");
        } else if let Some(c) = l.strip_prefix("completions:") {
            completions = Some(c.trim().parse().unwrap());
        } else if let Some(n) = l.strip_prefix("- name:") {
            name = Some(n.trim().to_string());
        } else if let (Some(v), Some(n)) = (l.strip_prefix("value:"), name.take()) {
            env.insert(n, v.trim().trim_matches('"').to_string());
        }
    }
    // the image's copy of deploy/ is this repository's
    for c in command.iter_mut() {
        if let Some(rest) = c.strip_prefix("/opt/lse/deploy/") {
            *c = repo().join("deploy").join(rest).to_string_lossy().into();
        }
    }
    (command, completions, env)
}

#[test]
fn kubernetes_indexed_job_then_merge_equals_a_single_run() {
    let Some(model) = lse_testdata::model("smollm2") else { return };
    let dir = lse_testdata::tmp("deploy", "k8s");
    let text = text(&dir);
    let (want, want_base) = single(&model, &text, &dir);
    let (command, completions, menv) = manifest(&repo().join("deploy/kubernetes/perplexity-shards-job.yaml"));
    let n = completions.expect("completions");
    assert_eq!(menv.get("LSE_SHARDS").map(String::as_str), Some(n.to_string().as_str()), "LSE_SHARDS must equal completions");
    let out = dir.join("shared");
    // the manifest's env, with this machine's paths (model, text, volume) and a short plan
    let mut env = menv.clone();
    env.extend(base_env(&model, &text, &out));
    for i in 0..n {
        let mut e = env.clone();
        e.insert("JOB_COMPLETION_INDEX".into(), i.to_string());
        ok(cmd(&command[0], &command[1..], &e));
    }
    let (mcommand, _, mut menv) = manifest(&repo().join("deploy/kubernetes/perplexity-merge-job.yaml"));
    menv.extend(base_env(&model, &text, &out));
    ok(cmd(&mcommand[0], &mcommand[1..], &menv));
    assert_eq!(numbers(&out.join("report.json")), want);
    assert_eq!(std::fs::read(out.join("base.kld")).unwrap(), want_base);
    eprintln!("kubernetes: {n} indexed pods merged equal the single run");
}

#[test]
fn the_shared_script_refuses_outside_a_scheduler() {
    let Some(model) = lse_testdata::model("smollm2") else { return };
    let dir = lse_testdata::tmp("deploy", "none");
    let text = text(&dir);
    let env = base_env(&model, &text, &dir.join("shared"));
    let o = cmd("bash", &[repo().join("deploy/perplexity-shard.sh").to_string_lossy().into(), "shard".into()], &env).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("neither SLURM_ARRAY_TASK_ID nor JOB_COMPLETION_INDEX"), "{err}");
}
