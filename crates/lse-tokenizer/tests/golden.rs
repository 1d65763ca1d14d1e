//! Large-text parity with llama.cpp: ids of wiki.test.raw and tokenizer-cases.txt, read as
//! llama-perplexity reads them (one trailing newline removed, add_special = true), for every
//! vocabulary file and both real models.
//!
//! wiki.test.raw is checked with parse_special = false (llama-perplexity's reading). The golden
//! ids of tokenizer-cases.txt were made by `llama-tokenize`, which parses special-token text by
//! default: its `<|im_start|>`, `<s>` ... come out as the special tokens there, so that file is
//! checked with parse_special = true (the only difference the flag makes on these texts).

mod common;

use std::time::Instant;

fn golden(rel: &str) -> serde_json::Value {
    let path = lse_testdata::shared(rel);
    serde_json::from_slice(
        &std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())),
    )
    .unwrap()
}

/// (golden name, file, parse_special)
const TEXTS: [(&str, &str, bool); 2] = [
    ("wiki.test.raw", "data/wiki.test.raw", false),
    ("tokenizer-cases.txt", "data/tokenizer-cases.txt", true),
];

fn check_all(label: &str, tok: &lse_tokenizer::Tokenizer, records: &serde_json::Value) {
    let mut failures = Vec::new();
    for (name, rel, parse_special) in TEXTS {
        let Some(g) = records.get(name) else { continue };
        let text = common::read_text(rel);
        let t0 = Instant::now();
        let ids = tok.tokenize(&text, true, parse_special);
        println!(
            "{label} {name}: {} ids in {:.3} s",
            ids.len(),
            t0.elapsed().as_secs_f64()
        );
        if let Err(e) = common::check_golden(&ids, g) {
            failures.push(format!("{label} {name}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn vocab_file(name: &str) {
    let all = golden("golden/vocab-tokens.json");
    let records = &all["vocabs"][name];
    assert!(records.is_object(), "no golden record for {name}");
    let tok = common::load(&common::vocab_path(name));
    check_all(name, &tok, records);
}

#[test]
fn golden_gpt2() {
    vocab_file("ggml-vocab-gpt-2.gguf");
}

#[test]
fn golden_llama_bpe() {
    vocab_file("ggml-vocab-llama-bpe.gguf");
}

#[test]
fn golden_llama_spm() {
    vocab_file("ggml-vocab-llama-spm.gguf");
}

#[test]
fn golden_qwen2() {
    vocab_file("ggml-vocab-qwen2.gguf");
}

#[test]
fn golden_qwen35() {
    vocab_file("ggml-vocab-qwen35.gguf");
}

fn real_model(short: &str) {
    let Some(path) = lse_testdata::model(short) else {
        return;
    };
    let t0 = Instant::now();
    let tok = common::load(&path);
    println!(
        "{short}: vocabulary loaded in {:.3} s",
        t0.elapsed().as_secs_f64()
    );
    let g = golden(&format!("golden/{short}/tokens.json"));
    check_all(short, &tok, &g["texts"]);
}

#[test]
fn golden_smollm2() {
    real_model("smollm2");
}

#[test]
fn golden_gemma3() {
    real_model("gemma3");
}

