//! `lse_engine_info`: the model's facts, the report's `config` (the same object `lse_perplexity`
//! reports) and the tokenizer's load notes, which the library says nowhere else; NULL pointers
//! are argument errors.

use lse::*;
use serde_json::{json, Value};
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::path::Path;
use std::ptr::null_mut;

fn take(p: *mut c_char) -> String {
    assert!(!p.is_null());
    let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
    unsafe { lse_string_free(p) };
    s
}

fn open(model: &Path) -> *mut LseEngine {
    let opts = CString::new(json!({"model": model, "threads": 2, "kv_len": 64}).to_string()).unwrap();
    let (mut e, mut err) = (null_mut(), null_mut());
    let rc = unsafe { lse_engine_open(opts.as_ptr(), &mut e, &mut err) };
    assert_eq!(rc, LSE_OK, "{}", if err.is_null() { String::new() } else { take(err) });
    e
}

fn info(e: *mut LseEngine) -> Value {
    let (mut out, mut err) = (null_mut(), null_mut());
    assert_eq!(unsafe { lse_engine_info(e, &mut out, &mut err) }, LSE_OK);
    assert!(err.is_null());
    serde_json::from_str(&take(out)).unwrap()
}

#[test]
fn engine_info_gives_the_model_the_config_and_the_load_notes() {
    let tiny = lse_testdata::golden("synthetic/llama-tiny.gguf");
    let f = lse_gguf::GgufFile::open(&tiny).unwrap();
    let n_vocab = match f.metadata().iter().find(|(k, _)| k == "tokenizer.ggml.tokens").map(|(_, v)| v) {
        Some(lse_gguf::Value::Array(t)) => t.len(),
        _ => panic!("the tiny model lists its tokens"),
    };
    let e = open(&tiny);
    let v = info(e);
    assert_eq!((&v["object"], &v["architecture"], &v["n_vocab"], &v["kv_capacity"]), (&json!("lse.engine"), &json!("llama"), &json!(n_vocab), &json!(64)));
    assert_eq!(v["load_notes"], json!([]));
    // the config a report carries
    let text = CString::new(json!({"tokens": (0..40).map(|i| i % n_vocab).collect::<Vec<_>>(), "ctx": 16}).to_string()).unwrap();
    let (mut out, mut err) = (null_mut(), null_mut());
    assert_eq!(unsafe { lse_perplexity(e, text.as_ptr(), &mut out, &mut err) }, LSE_OK);
    let report: Value = serde_json::from_str(&take(out)).unwrap();
    assert_eq!(v["config"], report["config"]);
    // NULL pointers
    let (mut out, mut err) = (null_mut(), null_mut());
    assert_eq!(unsafe { lse_engine_info(null_mut(), &mut out, &mut err) }, LSE_ERR_ARGUMENT);
    assert!(out.is_null() && take(err).contains("engine is NULL"));
    assert_eq!(unsafe { lse_engine_info(e, null_mut(), &mut err) }, LSE_ERR_ARGUMENT);
    assert!(take(err).contains("json_out"));
    unsafe { lse_engine_close(e) };

    // the same model with its EOS id past the vocabulary: the note says so
    let dir = lse_testdata::tmp("capi", "info");
    let patched = dir.join("tiny-bad-eos.gguf");
    lse_gguf::GgufWriter::copy_of(&f, &[], &[("tokenizer.ggml.eos_token_id", lse_gguf::Value::U32(999_999))]).write(&patched).unwrap();
    let e = open(&patched);
    let notes = info(e)["load_notes"].clone();
    unsafe { lse_engine_close(e) };
    let notes = notes.as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].as_str().unwrap().starts_with(&format!("tokenizer.ggml.eos_token_id = 999999 is outside the vocabulary of {n_vocab} tokens")), "{notes:?}");
}
