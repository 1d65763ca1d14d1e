//! The `lse-server` binary on bad input (SPEC §8) and its modes. Each bad input: non-zero exit,
//! exactly one stderr line `lse-server: ...` with a key phrase, no panic text, no output file left.


use lse_testdata::Tmp;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_lse-server");

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Out {
    let o = Command::new(BIN).args(args).env_remove("LSE_REQUIRE_DEVICE_KERNELS").output().expect("run lse-server");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn tmp(name: &str) -> Tmp {
    lse_testdata::tmp("cli", name)
}

fn files_in(d: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// Runs `args`, expects a one-line failure containing `phrase`, and that `dir` holds exactly `keep` afterwards.
fn fails(args: &[&str], phrase: &str, dir: Option<(&Path, &[&str])>) -> String {
    let o = run(args);
    assert_ne!(o.code, 0, "{args:?} succeeded: {}", o.stdout);
    let lines: Vec<&str> = o.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: stderr is not one line: {:?}", o.stderr);
    assert!(lines[0].starts_with("lse-server: "), "{:?}", lines[0]);
    assert!(lines[0].contains(phrase), "{args:?}: {:?} lacks {phrase:?}", lines[0]);
    for bad in ["panicked", "backtrace", "RUST_BACKTRACE", "internal error"] {
        assert!(!o.stderr.contains(bad), "{args:?}: {}", o.stderr);
    }
    assert!(o.stdout.is_empty(), "{args:?}: stdout {:?}", o.stdout);
    if let Some((d, keep)) = dir {
        let mut want: Vec<String> = keep.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(files_in(d), want, "{args:?}: files left behind");
    }
    lines[0].to_string()
}

fn shared(rel: &str) -> String {
    lse_testdata::shared(rel).to_string_lossy().into_owned()
}

fn tiny() -> String {
    shared("golden/synthetic/llama-tiny.gguf")
}

fn wiki() -> String {
    shared("data/wiki.test.raw")
}

// ---------- option validation (before the model loads) ----------

#[test]
fn chat_template_that_is_not_jinja_or_does_not_parse() {
    fails(&["--model", &tiny(), "--chat-template", "gemma"], "Jinja source or chatml", None);
    fails(&["--model", &tiny(), "--chat-template", "{% for m in messages %}"], "does not parse", None);
    let d = tmp("template");
    let f = d.join("t.jinja");
    std::fs::write(&f, "{{ messages ").unwrap();
    let l = fails(&["--model", &tiny(), "--chat-template-file", f.to_str().unwrap()], "does not parse", None);
    assert!(l.contains("--chat-template-file"), "{l}");
    // an empty template would start a server whose every chat request fails
    std::fs::write(&f, " \n\t\n").unwrap();
    fails(&["--model", &tiny(), "--chat-template-file", f.to_str().unwrap()], &format!("chat template file {} is empty", f.display()), None);
    std::fs::write(&f, "You are a helpful assistant.\n").unwrap();
    fails(&["--model", &tiny(), "--chat-template-file", f.to_str().unwrap()], "holds no Jinja", None);
}

#[test]
fn ubatch_larger_than_batch() {
    let l = fails(&["--model", &tiny(), "--perplexity", &wiki(), "--batch-size", "256", "--ubatch-size", "512"], "--ubatch-size", None);
    assert!(l.contains("--batch-size"));
}

#[test]
fn zero_batch_size() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--batch-size", "0"], "--batch-size must be a positive integer", None);
}

#[test]
fn negative_threads() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--threads", "-2"], "--threads", None);
}

#[test]
fn unknown_kv_dtype() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--kv-cache-dtype", "f8"], "f32, f16, bf16, q8_0", None);
}

#[test]
fn unknown_dialect() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--dialect", "avx9"], "simd, scalar", None);
}

#[test]
fn unknown_simd_level() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--simd", "avx9"], "avx512, avx2, neon, scalar", None);
}

#[test]
fn simd_level_the_cpu_lacks_is_refused() {
    let lacking = if cfg!(target_arch = "x86_64") { "neon" } else { "avx2" };
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--simd", lacking], "this CPU has no", None);
}

#[test]
fn simd_cap_shows_in_the_report_config() {
    if !cfg!(target_arch = "x86_64") || !std::is_x86_feature_detected!("avx2") {
        return;
    }
    let o = run(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-ctx", "128", "--perplexity-chunks", "2", "--simd", "avx2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
    assert_eq!(r["config"]["device_arch"], "x86_64-avx2", "{}", r["config"]);
}

#[test]
fn tokenize_output_is_a_tokens_file() {
    let d = tmp("tokens-roundtrip");
    let ids = d.join("ids.json");
    let o = run(&["--model", &tiny(), "--tokenize", &wiki(), "--tokenize-output", ids.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let scored = |mode: &str, input: &str| {
        let o = run(&["--model", &tiny(), mode, input, "--perplexity-ctx", "128", "--perplexity-chunks", "2"]);
        assert_eq!(o.code, 0, "{mode}: {}", o.stderr);
        let r: serde_json::Value = serde_json::from_str(&o.stdout).unwrap();
        r["perplexity"].as_f64().unwrap()
    };
    // (the token hashes differ: --tokenize keeps the file's last newline, --perplexity drops it)
    assert_eq!(scored("--perplexity-tokens", ids.to_str().unwrap()), scored("--perplexity", &wiki()));
}

#[test]
fn unknown_pool() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--pool", "tpu"], "--pool", None);
}

#[test]
fn unknown_method() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-method", "best"], "chunks, sliding", None);
}

#[test]
fn top_k_outside_range() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-kld-top-k", "33"], "between 1 and 32", None);
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-kld-top-k", "0"], "between 1 and 32", None);
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-kld-top-k", "8"], "only applies when writing a KL base with --perplexity-kld-base-out", None);
}

#[test]
fn stride_larger_than_ctx() {
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-method", "sliding", "--perplexity-ctx", "128", "--perplexity-stride", "129"],
        "--perplexity-stride",
        None,
    );
}

#[test]
fn unknown_option() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-ctxx", "5"], "unknown option --perplexity-ctxx", None);
}

#[test]
fn no_mode_serves_and_checks_the_server_options_first() {
    // without --perplexity/--tokenize/--generate the program serves HTTP; a bad option is refused
    // before anything is bound or loaded
    fails(&["--model", &tiny(), "--port", "99999"], "--port", None);
    fails(&["--model", &tiny(), "--parallel", "0"], "--parallel", None);
}

#[test]
fn missing_model() {
    let d = tmp("missing-model");
    let m = d.join("nope.gguf");
    let out = d.join("out.json");
    fails(&["--model", m.to_str().unwrap(), "--perplexity", &wiki(), "--perplexity-output", out.to_str().unwrap()], "not found", Some((&*d, &[])));
    fails(&["--model", m.to_str().unwrap(), "--tokenize", &wiki()], "not found", None);
}

#[test]
fn help_prints_usage() {
    let o = run(&["--help"]);
    assert_eq!(o.code, 0);
    assert!(o.stdout.contains("--perplexity-kld-top-k"));
}

// ---------- input files ----------

#[test]
fn invalid_utf8_text() {
    let d = tmp("utf8");
    let t = d.join("bad.txt");
    std::fs::write(&t, b"hello \xc3\x28 world").unwrap();
    let out = d.join("out.json");
    fails(
        &["--model", &tiny(), "--perplexity", t.to_str().unwrap(), "--perplexity-output", out.to_str().unwrap()],
        "offset 6",
        Some((&*d, &["bad.txt"])),
    );
    fails(&["--model", &tiny(), "--tokenize", t.to_str().unwrap()], "offset 6", None);
}

#[test]
fn missing_text_file() {
    fails(&["--model", &tiny(), "--perplexity", "/nonexistent/text.txt"], "/nonexistent/text.txt", None);
}

#[test]
fn unreadable_tokens_json() {
    let d = tmp("tokjson");
    let t = d.join("t.json");
    std::fs::write(&t, "[1, 2, 3").unwrap();
    fails(&["--model", &tiny(), "--perplexity-tokens", t.to_str().unwrap()], "not valid JSON", None);
    std::fs::write(&t, "[1, 2, \"x\"]").unwrap();
    fails(&["--model", &tiny(), "--perplexity-tokens", t.to_str().unwrap()], "element 2", None);
}

#[test]
fn bad_pairs_line() {
    let d = tmp("pairs");
    let t = d.join("p.jsonl");
    std::fs::write(&t, "{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":\"a\",\"response\":\"b\"}\n{\"prompt\":1}\n").unwrap();
    fails(&["--model", &tiny(), "--perplexity-pairs", t.to_str().unwrap()], "line 3", None);
    std::fs::write(&t, "{\"prompt\":\"a\",\"response\":\"b\"}\n{oops\n").unwrap();
    fails(&["--model", &tiny(), "--perplexity-pairs", t.to_str().unwrap()], "line 2", None);
}

#[test]
fn unwritable_output() {
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-output", "/nonexistent-dir/out.json"], "cannot write output file", None);
    fails(&["--model", &tiny(), "--tokenize", &wiki(), "--tokenize-output", "/nonexistent-dir/t.json"], "cannot write output file", None);
    let d = tmp("unwritable");
    fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-output", d.to_str().unwrap()], "directory", Some((&*d, &[])));
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-kld-base-out", "/nonexistent-dir/b.kld"],
        "cannot write KLD base",
        None,
    );
}

#[test]
fn non_base_file_as_base() {
    let d = tmp("nonbase");
    let out = d.join("out.json");
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-kld", &tiny(), "--perplexity-output", out.to_str().unwrap()],
        "not a KLD base",
        Some((&*d, &[])),
    );
}

#[test]
fn truncated_base() {
    let d = tmp("truncbase");
    let b = d.join("b.kld");
    let bytes = std::fs::read(shared("golden/synthetic/llama-tiny.llamacpp.kld")).unwrap();
    std::fs::write(&b, &bytes[..bytes.len() - 264]).unwrap();
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-ctx", "128", "--perplexity-chunks", "8", "--perplexity-kld", b.to_str().unwrap()],
        "truncated or corrupt",
        None,
    );
}

#[test]
fn base_settings_mismatch_before_model_work() {
    let base = shared("golden/synthetic/llama-tiny.llamacpp.kld"); // chunks, ctx 128, chunks 8
    let l = fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-ctx", "256", "--perplexity-chunks", "8", "--perplexity-kld", &base], "ctx", None);
    assert!(l.contains("128") && l.contains("256"), "{l}");
    let l = fails(&["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-ctx", "128", "--perplexity-kld", &base], "chunks", None);
    assert!(l.contains('8') && l.contains("null"), "{l}");
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-method", "sliding", "--perplexity-ctx", "128", "--perplexity-chunks", "8", "--perplexity-kld", &base],
        "method",
        None,
    );
    fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--perplexity-method", "sliding", "--perplexity-ctx", "128", "--perplexity-stride", "64", "--perplexity-chunks", "8", "--perplexity-kld", &base],
        "method",
        None,
    );
}

// ---------- needs the engine ----------

/// Byte offsets inside a GGUF of a tensor's info: (dims start, n_dims, type field, offset field);
/// `name` None = the first tensor.
fn gguf_tensor(b: &[u8], name: Option<&str>) -> (usize, usize, usize, usize) {
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let n_tensors = u64_at(8) as usize;
    let n_kv = u64_at(16) as usize;
    let mut o = 24;
    fn skip_value(b: &[u8], o: &mut usize, t: u32) {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        match t {
            0 | 1 | 7 => *o += 1,
            2 | 3 => *o += 2,
            4..=6 => *o += 4,
            10..=12 => *o += 8,
            8 => *o += 8 + u64_at(*o) as usize,
            9 => {
                let et = u32_at(*o);
                let n = u64_at(*o + 4) as usize;
                *o += 12;
                for _ in 0..n {
                    skip_value(b, o, et);
                }
            }
            _ => panic!("type {t}"),
        }
    }
    for _ in 0..n_kv {
        o += 8 + u64_at(o) as usize; // key
        let t = u32_at(o);
        o += 4;
        skip_value(b, &mut o, t);
    }
    for _ in 0..n_tensors {
        let len = u64_at(o) as usize;
        let this = std::str::from_utf8(&b[o + 8..o + 8 + len]).unwrap().to_string();
        o += 8 + len;
        let nd = u32_at(o) as usize;
        let dims = o + 4;
        o += 4 + 8 * nd;
        let (ty, off) = (o, o + 4);
        o += 12;
        if name.is_none_or(|n| n == this) {
            return (dims, nd, ty, off);
        }
    }
    panic!("tensor {name:?} not found");
}

fn corrupt_variants(d: &Path) -> Vec<(PathBuf, &'static str)> {
    let b = std::fs::read(tiny()).unwrap();
    let mut v = Vec::new();
    let mut put = |name: &str, bytes: Vec<u8>, phrase: &'static str| {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        v.push((p, phrase));
    };
    put("trunc-meta.gguf", b[..4000].to_vec(), "truncated");
    put("trunc-data.gguf", b[..b.len() - 4096].to_vec(), "gguf:");
    let mut x = b.clone();
    x[0..4].copy_from_slice(b"GGUX");
    put("bad-magic.gguf", x, "not a GGUF file");
    let mut x = b.clone();
    x[4..8].copy_from_slice(&99u32.to_le_bytes());
    put("bad-version.gguf", x, "version 99");
    let mut x = b.clone();
    x[8..16].copy_from_slice(&(u64::MAX / 3).to_le_bytes());
    put("huge-tensors.gguf", x, "count");
    let mut x = b.clone();
    x[16..24].copy_from_slice(&(u64::MAX / 3).to_le_bytes());
    put("huge-kv.gguf", x, "count");
    let (_, _, ty, off) = gguf_tensor(&b, None);
    let mut x = b.clone();
    x[ty..ty + 4].copy_from_slice(&200u32.to_le_bytes());
    put("bad-type.gguf", x, "unknown type id 200");
    let mut x = b.clone();
    x[off..off + 8].copy_from_slice(&(1u64 << 40).to_le_bytes());
    put("bad-offset.gguf", x, "gguf:");
    put("empty.gguf", vec![], "gguf:");
    v
}

/// Replaces the string value of metadata `key` by `new` (same length, so the layout is unchanged).
fn set_str(b: &mut [u8], key: &str, new: &str) {
    let k = key.as_bytes();
    let at = b.windows(k.len()).position(|w| w == k).expect("key present") + k.len();
    assert_eq!(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()), 8, "string value");
    let len = u64::from_le_bytes(b[at + 4..at + 12].try_into().unwrap()) as usize;
    assert_eq!(len, new.len());
    b[at + 12..at + 12 + len].copy_from_slice(new.as_bytes());
}

#[test]
fn unsupported_architecture() {
    let d = tmp("arch");
    let mut b = std::fs::read(tiny()).unwrap();
    set_str(&mut b, "general.architecture", "llamb");
    let m = d.join("m.gguf");
    std::fs::write(&m, b).unwrap();
    let out = d.join("out.json");
    fails(&["--model", m.to_str().unwrap(), "--perplexity", &wiki(), "--perplexity-output", out.to_str().unwrap()], "llamb", Some((&*d, &["m.gguf"])));
}

#[test]
fn unknown_tokenizer_pre_type() {
    let d = tmp("pre");
    let mut b = std::fs::read(shared("data/vocab/ggml-vocab-gpt-2.gguf")).unwrap();
    set_str(&mut b, "tokenizer.ggml.pre", "gpt-9");
    let m = d.join("v.gguf");
    std::fs::write(&m, b).unwrap();
    fails(&["--model", m.to_str().unwrap(), "--tokenize", &wiki()], "gpt-9", None);
}

#[test]
fn tensor_shape_mismatch() {
    let d = tmp("shape");
    let mut b = std::fs::read(tiny()).unwrap();
    // blk.0.attn_q.weight [64, 64]: make it [32, 128] (same size, wrong shape)
    let (dims, nd, _, _) = gguf_tensor(&b, Some("blk.0.attn_q.weight"));
    assert_eq!(nd, 2);
    let d0 = u64::from_le_bytes(b[dims..dims + 8].try_into().unwrap());
    let d1 = u64::from_le_bytes(b[dims + 8..dims + 16].try_into().unwrap());
    b[dims..dims + 8].copy_from_slice(&(d0 / 2).to_le_bytes());
    b[dims + 8..dims + 16].copy_from_slice(&(d1 * 2).to_le_bytes());
    let m = d.join("m.gguf");
    std::fs::write(&m, b).unwrap();
    fails(&["--model", m.to_str().unwrap(), "--perplexity", &wiki()], "shape", None);
}

#[test]
fn corrupt_gguf_tokenize() {
    let d = tmp("corrupt-tok");
    for (p, phrase) in corrupt_variants(&d) {
        let out = d.join("out.json");
        fails(&["--model", p.to_str().unwrap(), "--tokenize", &wiki(), "--tokenize-output", out.to_str().unwrap()], phrase, None);
        assert!(!out.exists());
    }
    assert!(files_in(&d).iter().all(|f| f.ends_with(".gguf")), "{:?}", files_in(&d));
}

#[test]
fn corrupt_gguf_perplexity() {
    let d = tmp("corrupt-ppl");
    for (p, phrase) in corrupt_variants(&d) {
        let out = d.join("out.json");
        fails(&["--model", p.to_str().unwrap(), "--perplexity", &wiki(), "--perplexity-output", out.to_str().unwrap()], phrase, None);
        assert!(!out.exists());
    }
    assert!(files_in(&d).iter().all(|f| f.ends_with(".gguf")), "{:?}", files_in(&d));
}

#[test]
fn text_too_short() {
    let d = tmp("short");
    let t = d.join("t.txt");
    std::fs::write(&t, "a few words only").unwrap();
    let out = d.join("out.json");
    let l = fails(
        &["--model", &tiny(), "--perplexity", t.to_str().unwrap(), "--perplexity-output", out.to_str().unwrap()],
        "too short",
        Some((&*d, &["t.txt"])),
    );
    assert!(l.contains("1024"), "{l}");
}

#[test]
fn token_ids_out_of_range() {
    let d = tmp("ids");
    let t = d.join("t.json");
    let ids: Vec<u32> = (0..300).map(|i| if i == 123 { 32000 } else { 100 + i }).collect();
    std::fs::write(&t, serde_json::to_string(&ids).unwrap()).unwrap();
    let l = fails(&["--model", &tiny(), "--perplexity-tokens", t.to_str().unwrap(), "--perplexity-ctx", "128"], "32000", None);
    assert!(l.contains("index 123"), "{l}");
}

#[test]
fn window_larger_than_kv_len() {
    let d = tmp("kvlen");
    let out = d.join("out.json");
    let l = fails(
        &["--model", &tiny(), "--perplexity", &wiki(), "--kv-len", "256", "--perplexity-output", out.to_str().unwrap()],
        "--kv-len",
        Some((&*d, &[])),
    );
    assert!(l.contains("512") && l.contains("256"), "{l}");
}

#[test]
fn pairs_record_larger_than_kv_len() {
    let d = tmp("pairs-kv");
    let t = d.join("p.jsonl");
    let long = "word ".repeat(200);
    std::fs::write(&t, format!("{{\"prompt\":\"Hi\",\"response\":\"there\"}}\n\n{{\"prompt\":\"{long}\",\"response\":\"x\"}}\n")).unwrap();
    fails(&["--model", &tiny(), "--perplexity-pairs", t.to_str().unwrap(), "--kv-len", "64"], "line 3", None);
}

#[test]
fn base_for_other_text_refused() {
    let d = tmp("othertext");
    let t = d.join("t.txt");
    let text = std::fs::read_to_string(wiki()).unwrap();
    std::fs::write(&t, &text[..text.len() / 2]).unwrap();
    let base = shared("golden/synthetic/llama-tiny.llamacpp.kld");
    fails(
        &["--model", &tiny(), "--perplexity", t.to_str().unwrap(), "--perplexity-ctx", "128", "--perplexity-chunks", "8", "--perplexity-kld", &base],
        "tokens",
        None,
    );
}
