//! `lse-server --generate`: finish reasons (end-of-generation token, stop string across token
//! boundaries, max tokens), seeded sampling, whole UTF-8 characters, and bad input refused with
//! one line and a non-zero exit (never a panic); `--generate-suffix` fills in the middle.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_lse-server")
}

fn run(model: &Path, args: &[&str]) -> Output {
    Command::new(bin()).arg("--model").arg(model).args(["--threads", "2"]).args(args).output().unwrap()
}

fn generate(model: &Path, args: &[&str]) -> Value {
    let o = run(model, args);
    assert!(o.status.success(), "lse-server {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("JSON on stdout")
}

fn smollm2() -> Option<PathBuf> {
    lse_testdata::model("smollm2")
}

fn ids(v: &Value) -> Vec<u64> {
    v["ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

const CHAT: &str = "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n";

#[test]
fn end_of_generation_token_ends_with_eos() {
    let Some(m) = smollm2() else { return };
    let r = generate(&m, &["--generate", CHAT, "-n", "64", "--temp", "0"]);
    assert_eq!(r["finish_reason"], "eos", "{r}");
    // <|im_end|> (id 2) is SmolLM2's end-of-turn token; its piece is not part of the text
    assert_eq!(*ids(&r).last().unwrap(), 2);
    assert!(!r["text"].as_str().unwrap().contains("<|im_end|>"));
    assert_eq!(r["logprobs"].as_array().unwrap().len(), ids(&r).len());
    // --ignore-eos goes on to the limit
    let r = generate(&m, &["--generate", CHAT, "-n", "24", "--temp", "0", "--ignore-eos"]);
    assert_eq!((r["finish_reason"].as_str(), ids(&r).len()), (Some("length"), 24));
}

#[test]
fn stop_strings_match_across_tokens_and_max_tokens_ends_with_length() {
    let Some(m) = smollm2() else { return };
    let prompt = "The capital of France is";
    let r = generate(&m, &["--generate", prompt, "-n", "16", "--temp", "0"]);
    assert_eq!((r["finish_reason"].as_str(), ids(&r).len()), (Some("length"), 16));
    let text = r["text"].as_str().unwrap().to_string();
    // a stop string that spans a token boundary: 2 bytes of one piece and 2 of the next
    let len_after = |n: usize| generate(&m, &["--generate", prompt, "-n", &n.to_string(), "--temp", "0"])["text"].as_str().unwrap().len();
    let mut lens = vec![0, len_after(1)];
    let cut = loop {
        let n = lens.len();
        assert!(n < 16, "no two consecutive pieces of 2+ bytes in {text:?}");
        lens.push(len_after(n));
        let (a, b, c) = (lens[n - 2], lens[n - 1], lens[n]);
        if b - a >= 2 && c - b >= 2 && text.is_char_boundary(b - 2) && text.is_char_boundary(b + 2) {
            break b;
        }
    };
    let stop = &text[cut - 2..cut + 2];
    let s = generate(&m, &["--generate", prompt, "-n", "16", "--temp", "0", "--stop", "zzzz", "--stop", stop]);
    assert_eq!(s["finish_reason"], "stop", "{s}");
    assert_eq!(s["text"].as_str().unwrap(), &text[..text.find(stop).unwrap()]);
}

#[test]
fn seeded_sampling_is_reproducible() {
    let Some(m) = smollm2() else { return };
    let args = ["--generate", "Once upon a time", "-n", "20", "--temp", "1.0", "--top-k", "0", "--top-p", "1", "--min-p", "0"];
    let a = generate(&m, &[&args[..], &["--seed", "11"]].concat());
    let b = generate(&m, &[&args[..], &["--seed", "11"]].concat());
    let c = generate(&m, &[&args[..], &["--seed", "12"]].concat());
    assert_eq!((ids(&a), &a["text"]), (ids(&b), &b["text"]));
    assert_ne!(ids(&a), ids(&c));
}

#[test]
fn multibyte_text_is_never_cut_inside_a_character() {
    let Some(m) = lse_testdata::model("gemma3") else { return };
    let r = generate(&m, &["--generate", "日本の首都は", "-n", "32", "--temp", "0"]);
    let text = r["text"].as_str().unwrap();
    assert!(text.chars().filter(|c| !c.is_ascii()).count() >= 5, "expected Japanese text: {text:?}");
    assert!(!text.contains('\u{fffd}'), "broken character in {text:?}");
}

#[test]
fn bad_input_is_one_line_and_a_non_zero_exit() {
    let Some(m) = smollm2() else { return };
    let long = "word ".repeat(40);
    for (args, phrase) in [
        (vec!["--generate", ""], "empty"),
        (vec!["--generate", &long, "--kv-len", "16"], "--kv-len"),
        (vec!["--generate", "hi", "-n", "-1"], "-n"),
        (vec!["--generate", "hi", "--temp", "-0.5"], "temperature"),
        (vec!["--generate", "hi", "--top-p", "0"], "top-p"),
        (vec!["--generate", "hi", "--top-p", "1.01"], "top-p"),
        (vec!["--generate", "hi", "--top-k", "-1"], "top-k"),
        (vec!["--generate", "hi", "--threads", "100000"], "--threads"),
        (vec!["--generate", "hi", "--generate-output", "/nonexistent-dir/x.json"], "x.json"),
        (vec!["--generate", "hi", "--generate-suffix", "there"], "cannot fill in the middle"),
        (vec!["--perplexity", "../../data/wiki.test.raw", "--perplexity-ctx", "2", "--perplexity-chunks", "2"], "--perplexity-ctx 2"),
    ] {
        let o = Command::new(bin()).arg("--model").arg(&m).args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(phrase) && !err.contains("panick"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?} printed to stdout");
    }
}

/// `--json-object`: the text is one JSON object (serde_json, an independent parser, reads it) and
/// generation stops when it closes, greedy and sampled; without it the same prompt's greedy answer
/// is not JSON.
#[test]
fn json_mode_generates_one_object_and_stops_when_it_closes() {
    let Some(m) = smollm2() else { return };
    let p = "<|im_start|>user\nGive me a JSON object describing a cat with name and age.<|im_end|>\n<|im_start|>assistant\n";
    let free = generate(&m, &["--generate", p, "-n", "24", "--temp", "0"]);
    assert!(serde_json::from_str::<Value>(free["text"].as_str().unwrap()).is_err(), "{free}");
    for sampling in [&["--temp", "0"][..], &["--temp", "1", "--seed", "1"], &["--temp", "1", "--seed", "2"], &["--temp", "1", "--seed", "3"]] {
        let r = generate(&m, &[&["--generate", p, "-n", "200", "--json-object"][..], sampling].concat());
        assert_eq!(r["finish_reason"], "stop", "{sampling:?}: {r}");
        let text = r["text"].as_str().unwrap();
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{sampling:?}: {e}: {text:?}"));
        assert!(v.is_object(), "{text:?}");
    }
}

/// `--json-schema`: the text is an instance of the schema (checked here by hand: the properties in
/// the schema's order, their types, the enum, the length bounds), greedy and sampled, and the
/// generation stops when it closes; a schema with a keyword it cannot follow is refused.
#[test]
fn json_schema_mode_generates_an_instance() {
    let Some(m) = smollm2() else { return };
    let p = "<|im_start|>user\nGive me a JSON object describing a cat.<|im_end|>\n<|im_start|>assistant\n";
    let schema = r#"{"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"},
        "indoor": {"type": "boolean"}, "color": {"enum": ["black", "white", "tabby"]},
        "toys": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3}}, "required": ["name", "age"]}"#;
    for sampling in [&["--temp", "0"][..], &["--temp", "1", "--seed", "1"], &["--temp", "1", "--seed", "2"]] {
        let r = generate(&m, &[&["--generate", p, "-n", "200", "--json-schema", schema][..], sampling].concat());
        assert_eq!(r["finish_reason"], "stop", "{sampling:?}: {r}");
        let v: Value = serde_json::from_str(r["text"].as_str().unwrap()).unwrap();
        let o = v.as_object().unwrap();
        assert_eq!(o.keys().collect::<Vec<_>>(), ["name", "age", "indoor", "color", "toys"], "{v}");
        assert!(o["name"].as_str().is_some_and(|s| s.chars().count() <= 20), "{v}");
        assert!(o["age"].is_i64() && o["indoor"].is_boolean(), "{v}");
        assert!(["black", "white", "tabby"].contains(&o["color"].as_str().unwrap()), "{v}");
        let toys = o["toys"].as_array().unwrap();
        assert!(toys.len() <= 3 && toys.iter().all(|t| t.as_str().is_some_and(|s| s.chars().count() <= 20)), "{v}");
    }
    let o = run(&m, &["--generate", p, "--json-schema", r#"{"type": "object", "properties": {"a": {"type": "string", "pattern": "x"}}}"#]);
    assert!(!o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim(), "lse-server: json_schema: \"pattern\" (in property \"a\") is not supported");
}

/// `--generate-suffix`: the prompt and the suffix laid out with Qwen2.5-Coder's FIM tokens (the
/// single-file form); the greedy answer equals llama-server's (data/golden/infill, a case with no
/// near-tie in its 48 steps).
#[test]
fn generate_suffix_fills_the_middle_as_llama_server() {
    let Some(m) = lse_testdata::model("qwen25coder") else { return };
    let g: Value = serde_json::from_str(&std::fs::read_to_string(lse_testdata::repo_root().join("data/golden/infill/qwen2.5-coder-0.5b-instruct-q4_k_m.json")).unwrap()).unwrap();
    let c = g["cases"].as_array().unwrap().iter().find(|c| c["kind"] == "suffix" && c["name"] == "javascript").unwrap();
    let r = generate(&m, &["--generate", c["request"]["prefix"].as_str().unwrap(), "--generate-suffix", c["request"]["suffix"].as_str().unwrap(), "-n", "48", "--temp", "0"]);
    assert_eq!((&r["prompt_tokens"], &r["text"]), (&c["tokens_evaluated"], &c["text"]), "{r}");
    assert_eq!(r["ids"], c["ids"]);
}

/// A special token id past the vocabulary is said on stderr when the model loads (llama.cpp's
/// "bad special token" warning), and the run goes on.
#[test]
fn special_ids_outside_the_vocabulary_are_said_at_load() {
    let tiny = lse_testdata::golden("synthetic/llama-tiny.gguf");
    let f = lse_gguf::GgufFile::open(&tiny).unwrap();
    let dir = lse_testdata::tmp("generate", "notes");
    let patched = dir.join("tiny-bad-eos.gguf");
    lse_gguf::GgufWriter::copy_of(&f, &[], &[("tokenizer.ggml.eos_token_id", lse_gguf::Value::U32(999_999))]).write(&patched).unwrap();
    let o = run(&patched, &["--generate", "a", "-n", "2", "--temp", "0"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("tokenizer.ggml.eos_token_id = 999999 is outside the vocabulary of"), "{err}");
    // the same file without the patch says nothing of the kind
    let o = run(&tiny, &["--generate", "a", "-n", "2", "--temp", "0"]);
    assert!(!String::from_utf8_lossy(&o.stderr).contains("outside the vocabulary"));
}
