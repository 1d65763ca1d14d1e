//! `lse_embed` through the rlib on SmolLM2: llama-server's mean-pooled vectors
//! (data/golden/embedding) at cosine similarity >= 0.999, the report's fields, and its errors
//! (no pooling on a generative model: LSE_ERR_RUN; a bad request: LSE_ERR_ARGUMENT).

use lse::*;
use serde_json::{json, Value};
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::null_mut;

fn take(p: *mut c_char) -> String {
    assert!(!p.is_null());
    let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
    unsafe { lse_string_free(p) };
    s
}

/// `lse_embed(e, req)`: the return code and the answer or the message.
fn embed(e: *mut LseEngine, req: &Value) -> (i32, String) {
    let req = CString::new(req.to_string()).unwrap();
    let (mut out, mut err) = (null_mut(), null_mut());
    let rc = unsafe { lse_embed(e, req.as_ptr(), &mut out, &mut err) };
    (rc, if rc == LSE_OK { take(out) } else { take(err) })
}

#[test]
fn lse_embed_matches_llama_server_and_refuses_bad_requests() {
    let Some(model) = lse_testdata::model("smollm2") else { return };
    let opts = CString::new(json!({"model": model, "threads": 2}).to_string()).unwrap();
    let (mut e, mut err) = (null_mut(), null_mut());
    assert_eq!(unsafe { lse_engine_open(opts.as_ptr(), &mut e, &mut err) }, LSE_OK);
    let p = lse_testdata::repo_root().join("data/golden/embedding/SmolLM2-135M-Instruct.Q4_1.json");
    let g: Value = serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
    let want = g["cases"].as_array().unwrap().iter().find(|c| c["pooling"] == "mean" && c["embd_normalize"] == 2).unwrap();
    let (rc, out) = embed(e, &json!({"input": g["inputs"], "pooling": "mean"}));
    assert_eq!(rc, LSE_OK, "{out}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((&r["object"], &r["pooling"], &r["normalize"], &r["prompt_tokens"]), (&json!("lse.embeddings"), &json!("mean"), &json!(2), &want["prompt_tokens"]));
    for (v, w) in r["embeddings"].as_array().unwrap().iter().zip(want["embeddings"].as_array().unwrap()) {
        let dot: f64 = v.as_array().unwrap().iter().zip(w.as_array().unwrap()).map(|(a, b)| a.as_f64().unwrap() * b.as_f64().unwrap()).sum();
        assert!(dot >= 0.999, "cosine {dot} (both of length 1)");
    }
    for (req, code, phrase) in [
        (json!({"input": "hi"}), LSE_ERR_RUN, "pooling"),
        (json!({"input": [], "pooling": "mean"}), LSE_ERR_ARGUMENT, "no tokens"),
        (json!({"input": "hi", "pooling": "rank"}), LSE_ERR_ARGUMENT, "rank"),
        (json!({"input": "hi", "pooling": "mean", "normalize": -3}), LSE_ERR_ARGUMENT, "normalize"),
        (json!({"input": [1, 999999], "pooling": "mean"}), LSE_ERR_RUN, "outside the vocabulary"),
        (json!({"text": "hi"}), LSE_ERR_ARGUMENT, "unknown field"),
    ] {
        let (rc, msg) = embed(e, &req);
        assert_eq!(rc, code, "{req}: {msg}");
        assert!(msg.contains(phrase), "{req}: {msg}");
    }
    unsafe { lse_engine_close(e) };
}
