//! The C entry points (through the rlib) on the tiny mixture-of-experts models: lse_perplexity
//! reproduces llama-perplexity's PPL on wiki.test.raw (ctx 128, 8 chunks) and lse_generate
//! llama-server's greedy tokens (data/golden/synthetic-moe).

use lse::*;
use serde_json::Value;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::path::PathBuf;
use std::ptr::null_mut;

fn dir() -> PathBuf {
    lse_testdata::golden("synthetic-moe")
}

fn json(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

fn take(p: *mut c_char) -> String {
    assert!(!p.is_null());
    let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
    unsafe { lse_string_free(p) };
    s
}

/// Calls `f(engine, request, &mut out, &mut err)` and returns the parsed JSON answer.
fn call(e: *mut LseEngine, f: unsafe extern "C" fn(*mut LseEngine, *const c_char, *mut *mut c_char, *mut *mut c_char) -> i32, req: &Value) -> Value {
    let req = CString::new(req.to_string()).unwrap();
    let (mut out, mut err) = (null_mut(), null_mut());
    let rc = unsafe { f(e, req.as_ptr(), &mut out, &mut err) };
    assert_eq!(rc, LSE_OK, "{}", if err.is_null() { String::new() } else { take(err) });
    serde_json::from_str(&take(out)).unwrap()
}

fn check(stem: &str) {
    let opts = CString::new(serde_json::json!({"model": dir().join(format!("{stem}.gguf")), "threads": 2}).to_string()).unwrap();
    let (mut e, mut err) = (null_mut(), null_mut());
    let rc = unsafe { lse_engine_open(opts.as_ptr(), &mut e, &mut err) };
    assert_eq!(rc, LSE_OK, "{}", if err.is_null() { String::new() } else { take(err) });

    // llama-perplexity -f drops one trailing newline; flash attention and an f16 cache are the defaults
    let mut text = std::fs::read_to_string(lse_testdata::repo_root().join("data/wiki.test.raw")).unwrap();
    text.pop();
    let report = call(e, lse_perplexity, &serde_json::json!({"text": text, "ctx": 128, "chunks": 8}));
    let gold = json(dir().join(format!("{stem}.fa-kvf16.json")));
    let (ppl, want) = (report["perplexity"].as_f64().unwrap(), gold["ppl"].as_f64().unwrap());
    eprintln!("{stem}: lse_perplexity {ppl:.4}, llama.cpp {want:.4}");
    assert!((ppl / want - 1.0).abs() < 1e-4, "{stem}: PPL {ppl} vs llama.cpp {want}");

    let g = json(dir().join(format!("generation/{stem}.json")));
    let case = g["cases"].as_array().unwrap().iter().find(|c| c["repeat_penalty"].as_f64() == Some(1.0)).unwrap();
    let req = serde_json::json!({"prompt": case["prompt_ids"], "max_tokens": 64, "temperature": 0, "repeat_penalty": 1.0});
    let out = call(e, lse_generate, &req);
    assert_eq!(out["ids"], case["ids"], "{stem}: lse_generate ids vs llama-server");
    unsafe { lse_engine_close(e) };
}

#[test]
fn qwen3moe_tiny_through_the_c_api() {
    check("qwen3moe-tiny");
}

#[test]
fn qwen35moe_tiny_through_the_c_api() {
    check("qwen35moe-tiny");
}

#[test]
fn gpt_oss_tiny_through_the_c_api() {
    check("gpt-oss-tiny");
}
