//! The C API from C: `tests/c/test_capi.c` and `examples/score.c` are compiled with the system C
//! compiler (`cc`, or `$CC`) against `include/lse/lse.h` and the release `liblse`, and run.
//!
//! The library and the reference CLI (`lse-server`) are release builds from the target folder this
//! test was built in: in a release test run, the cdylib cargo built with this test
//! (`target/release/deps`); otherwise `cargo build --release -p lse-capi` builds it (scoring a real
//! model needs an optimised build). `target/release/lse-server` is brought up to date with cargo.
//!
//! The real-model tests score `wiki.test.raw` with SmolLM2 (fetched on first use; skipped with a
//! printed reason when it cannot be had) and compare with `lse-server` for the same request.
//! When valgrind is installed, the C test also runs under it with a tiny request.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Real-model runs take both cores; run them one at a time.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|p| p.into_inner())
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// The `target/<profile>` folder of this test binary (`target/<profile>/deps/c_api-…`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).expect("test binary lives in target/<profile>/deps").to_path_buf()
}

fn cdylib_name() -> &'static str {
    if cfg!(target_os = "macos") {
        "liblse.dylib"
    } else if cfg!(windows) {
        "lse.dll"
    } else {
        "liblse.so"
    }
}

fn exe(name: &str) -> String {
    format!("{name}{}", std::env::consts::EXE_SUFFIX)
}

/// Runs `cargo build --release` for `packages` in this test's target folder.
fn cargo_build_release(packages: &[&str]) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = profile_dir().parent().unwrap().to_path_buf();
    let mut cmd = Command::new(cargo);
    cmd.current_dir(repo()).args(["build", "--release", "--target-dir"]).arg(&target);
    for p in packages {
        cmd.args(["-p", p]);
    }
    let out = cmd.output().expect("run cargo");
    assert!(out.status.success(), "cargo build --release {packages:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
}

/// The folder holding the release `liblse` to test: in a release test run, the one cargo just built
/// for this test (`target/release/deps`); otherwise `target/release` after
/// `cargo build --release -p lse-capi` (scoring a real model needs an optimised build).
fn lib_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        let deps = dir.join("deps");
        if dir.file_name().is_some_and(|n| n == "release") && deps.join(cdylib_name()).exists() {
            return deps;
        }
        cargo_build_release(&["lse-capi"]);
        let release = release_dir().to_path_buf();
        assert!(release.join(cdylib_name()).exists(), "{} not built", release.join(cdylib_name()).display());
        release
    })
}

/// `target/release` (where `lse-server` is).
fn release_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| profile_dir().parent().unwrap().join("release"))
}

/// The reference CLI: `LSE_SERVER` when set (`scripts/test.sh` names the one its `cargo test
/// --workspace` builds), else `target/release/lse-server` brought up to date first. Building the
/// package alone leaves out other members' dev-dependency features, which rebuilds most
/// dependencies (about a minute on 2 cores) after a workspace test build.
fn cli() -> PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(|| {
        if let Some(p) = std::env::var_os("LSE_SERVER") {
            return PathBuf::from(p);
        }
        cargo_build_release(&["lse-server"]);
        let p = release_dir().join(exe("lse-server"));
        assert!(p.exists(), "{} not built", p.display());
        p
    })
    .clone()
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lse-capi")
}

/// Compiles a C program against the header and the release library.
fn compile(source: &Path, name: &str) -> PathBuf {
    let lib = lib_dir();
    std::fs::create_dir_all(tmp()).unwrap();
    let out = tmp().join(exe(name));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let mut rpath = std::ffi::OsString::from("-Wl,-rpath,");
    rpath.push(lib);
    let o = Command::new(&cc)
        .args(["-std=c11", "-D_POSIX_C_SOURCE=200809L", "-g", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread"])
        .arg("-I")
        .arg(repo().join("include"))
        .arg(source)
        .arg("-o")
        .arg(&out)
        .arg("-L")
        .arg(lib)
        .arg("-llse")
        .arg(rpath)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc}: {e}"));
    assert!(o.status.success(), "{cc} {} failed:\n{}", source.display(), String::from_utf8_lossy(&o.stderr));
    out
}

fn test_program() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile(&repo().join("crates/lse-capi/tests/c/test_capi.c"), "test_capi")).clone()
}

/// Status, stdout and the end of stderr (valgrind's is long).
/// A command for a compiled C program: the library search path is `lib_dir()` only. (Cargo
/// puts `target/<profile>` and its `deps` on `LD_LIBRARY_PATH` for tests, which would win over the
/// program's rpath and could load a stale `liblse` of another build.)
fn c_command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    for var in ["LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH"] {
        c.env(var, lib_dir());
    }
    c
}

fn show(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr);
    let tail = &err[err.char_indices().rev().nth(6000).map_or(0, |(i, _)| i)..];
    format!("status {:?}\n--- stdout\n{}--- stderr (end)\n{tail}", o.status, String::from_utf8_lossy(&o.stdout))
}

fn smollm2() -> Option<PathBuf> {
    let m = lse_testdata::model("smollm2");
    if m.is_none() {
        eprintln!("SmolLM2 unavailable: skipping the real-model C API test");
    }
    m
}

/// The command line's report for `text` scored with ctx/chunks and the engine options `engine_args`.
fn cli_report(model: &Path, text: &Path, ctx: usize, chunks: usize, engine_args: &[&str]) -> Value {
    let o = Command::new(cli())
        .arg("--model")
        .arg(model)
        .arg("--perplexity")
        .arg(text)
        .args(["--perplexity-ctx", &ctx.to_string(), "--perplexity-chunks", &chunks.to_string(), "--quiet"])
        .args(engine_args)
        .output()
        .unwrap();
    assert!(o.status.success(), "lse-server failed: {}", show(&o));
    serde_json::from_slice(&o.stdout).expect("lse-server prints JSON")
}

/// Runs the C test (under `wrapper`, e.g. valgrind, when given) with real scoring; returns its output
/// and the report it wrote.
fn run_c_test(wrapper: &[&str], options: &Value, text: &Path, ctx: usize, chunks: usize, name: &str) -> (Output, Option<Value>) {
    let out = tmp().join(name);
    let _ = std::fs::remove_file(&out);
    let mut cmd = match wrapper.split_first() {
        Some((w, rest)) => {
            let mut c = c_command(w);
            c.args(rest).arg(test_program());
            c
        }
        None => c_command(test_program()),
    };
    let o = cmd
        .arg(options.to_string())
        .arg(text)
        .args([ctx, chunks].map(|n| n.to_string()))
        .arg(&out)
        .output()
        .unwrap();
    let report = std::fs::read(&out).ok().map(|b| serde_json::from_slice(&b).expect("the report is JSON"));
    (o, report)
}

/// The C test's report equals the command line's for the same request.
fn assert_same_report(c: &Value, cli: &Value) {
    for key in ["object", "tokens", "token_ids_sha256", "method", "ctx", "stride", "windows_scored", "scored_tokens", "prefill_tokens"] {
        assert_eq!(c[key], cli[key], "{key}");
    }
    let (pc, pr) = (c["perplexity"].as_f64().unwrap(), cli["perplexity"].as_f64().unwrap());
    assert!((pc - pr).abs() <= 1e-12, "perplexity: C API {pc} vs CLI {pr}");
    let (nc, nr) = (c["mean_nll"].as_f64().unwrap(), cli["mean_nll"].as_f64().unwrap());
    assert!((nc - nr).abs() <= 1e-12, "mean_nll: C API {nc} vs CLI {nr}");
    // same engine options -> same config
    assert!(c["config"].is_object(), "config: {}", c["config"]);
    assert_eq!(c["config"], cli["config"], "config");
    let keys_c: Vec<&String> = c.as_object().unwrap().keys().collect();
    let keys_r: Vec<&String> = cli.as_object().unwrap().keys().collect();
    assert_eq!(keys_c, keys_r, "report keys and their order");
}

/// A short prefix of the text (about `bytes` bytes, cut at a line end), for quick runs.
fn text_prefix(bytes: usize, name: &str) -> PathBuf {
    let full = std::fs::read(lse_testdata::data("wiki.test.raw")).expect("wiki.test.raw");
    let mut end = bytes.min(full.len());
    while end < full.len() && full[end - 1] != b'\n' {
        end += 1;
    }
    std::fs::create_dir_all(tmp()).unwrap();
    let p = tmp().join(name);
    std::fs::write(&p, &full[..end]).unwrap();
    p
}

#[test]
fn header_matches_the_library_exports() {
    let lib = lib_dir().join(cdylib_name());
    let o = match Command::new("nm").args(["-D", "--defined-only"]).arg(&lib).output() {
        Ok(o) if o.status.success() => o,
        _ => {
            eprintln!("nm unavailable: skipping the export check");
            return;
        }
    };
    let mut exported: Vec<String> = String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[1] == "T" && f[2].starts_with("lse_")).then(|| f[2].to_string())
        })
        .collect();
    exported.sort();
    let header = std::fs::read_to_string(repo().join("include/lse/lse.h")).unwrap();
    let mut declared: Vec<String> = header
        .lines()
        .filter(|l| !l.starts_with(' ') && !l.starts_with('#') && l.contains("lse_") && l.contains('('))
        .filter_map(|l| l.split('(').next()?.split([' ', '*']).next_back().map(str::to_string))
        .collect();
    declared.sort();
    assert_eq!(declared, ["lse_embed", "lse_engine_close", "lse_engine_info", "lse_engine_open", "lse_generate", "lse_perplexity", "lse_string_free"]);
    assert_eq!(exported, declared, "functions exported by {} vs declared in lse.h", lib.display());
}

#[test]
fn c_test_bad_arguments_without_a_model() {
    let o = c_command(test_program()).arg("-").output().unwrap();
    assert!(o.status.success(), "{}", show(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("PASSED"), "{}", show(&o));
}

#[test]
fn c_test_scores_like_the_cli() {
    let Some(model) = smollm2() else { return };
    let _g = heavy();
    let text = lse_testdata::data("wiki.test.raw");
    let (ctx, chunks) = (128, 3);
    let reference = cli_report(&model, &text, ctx, chunks, &["--threads", "2"]);
    let options = serde_json::json!({"model": model, "threads": 2});
    let (o, report) = run_c_test(&[], &options, &text, ctx, chunks, "report-wiki.json");
    println!("{}", String::from_utf8_lossy(&o.stdout));
    assert!(o.status.success(), "{}", show(&o));
    let report = report.expect("the C test wrote its report");
    assert_same_report(&report, &reference);
    assert_eq!(report["scored_tokens"], (chunks * (ctx - ctx / 2 - 1)) as u64);
}

#[test]
fn example_scores_like_the_cli() {
    let Some(model) = smollm2() else { return };
    let _g = heavy();
    let text = text_prefix(4000, "wiki-4k.txt");
    let (ctx, chunks) = (64, 2);
    let program = compile(&repo().join("examples/score.c"), "score");
    let o = c_command(program)
        .arg(&model)
        .arg(&text)
        .args([ctx, chunks].map(|n| n.to_string()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", show(&o));
    let report: Value = serde_json::from_slice(&o.stdout).expect("the example prints the report");
    // both keep every engine option at its default
    assert_same_report(&report, &cli_report(&model, &text, ctx, chunks, &[]));
}

#[test]
fn c_generate_refuses_bad_requests_and_matches_the_cli() {
    let Some(model) = smollm2() else { return };
    let _g = heavy();
    let program = compile(&repo().join("crates/lse-capi/tests/c/test_generate.c"), "test_generate");
    let out = tmp().join("generation.json");
    let _ = std::fs::remove_file(&out);
    let options = serde_json::json!({"model": model, "threads": 2});
    let req = serde_json::json!({"prompt": "The capital of France is", "max_tokens": 12, "temperature": 0});
    let o = c_command(program).arg(options.to_string()).arg(req.to_string()).arg(&out).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).contains("PASSED"), "{}", show(&o));
    let c: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let o = Command::new(cli())
        .arg("--model")
        .arg(&model)
        .args(["--generate", "The capital of France is", "-n", "12", "--temp", "0", "--threads", "2"])
        .output()
        .unwrap();
    assert!(o.status.success(), "lse-server --generate failed: {}", show(&o));
    let cli: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(c["object"], "lse.generation");
    for key in ["prompt_tokens", "ids", "text", "finish_reason", "logprobs", "top2_margin"] {
        assert_eq!(c[key], cli[key], "{key}");
    }
    assert_eq!(c["ids"].as_array().unwrap().len(), 12);
}

fn valgrind() -> Option<PathBuf> {
    ["/usr/bin/valgrind", "/usr/local/bin/valgrind"].iter().map(PathBuf::from).find(|p| p.exists())
}

/// Valgrind hides AVX-512 (so `simd` would not pick the native CLI's kernels) and runs SIMD code very
/// slowly: this run uses the scalar kernels and is tiny (2 chunks of 4 tokens, one thread, a 64-token
/// KV cache) on the synthetic Q4_0 llama (a llama-architecture GGUF as SmolLM2 is, made by
/// `scripts/get-testdata.sh`): the API's memory handling does not depend on the model's size, and
/// SmolLM2's 135M scalar multiply-adds per row took 95 s under memcheck where this takes ~3 s.
#[test]
fn c_test_under_valgrind() {
    let Some(vg) = valgrind() else {
        eprintln!("valgrind not installed: skipping");
        return;
    };
    let model = lse_testdata::golden("synthetic/llama-tiny-q4_0.gguf");
    let _g = heavy();
    let text = text_prefix(1000, "wiki-1k.txt");
    let (ctx, chunks) = (4, 2);
    let options = serde_json::json!({"model": model, "threads": 1, "dialect": "scalar", "kv_len": 64});
    let vg = vg.to_string_lossy().into_owned();
    let wrapper = [vg.as_str(), "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=1"];
    let (o, report) = run_c_test(&wrapper, &options, &text, ctx, chunks, "report-valgrind.json");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let summary: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR SUMMARY") || l.contains("definitely lost")).collect();
    println!("{}", summary.join("\n"));
    assert!(o.status.success(), "{}", show(&o));
    assert!(stderr.contains("ERROR SUMMARY: 0 errors"), "{}", show(&o));
    let reference = cli_report(&model, &text, ctx, chunks, &["--threads", "1", "--dialect", "scalar", "--kv-len", "64"]);
    assert_same_report(&report.expect("the C test wrote its report"), &reference);
}
