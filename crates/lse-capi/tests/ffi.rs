//! The entry points called from Rust through the rlib (the same functions the cdylib exports):
//! pointer checks and error messages that need no model and no C compiler.

use lse::*;
use std::ffi::{CStr, CString};
use std::os::raw::c_char;
use std::ptr::null_mut;

fn take(p: *mut c_char) -> String {
    assert!(!p.is_null(), "expected a message");
    let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
    unsafe { lse_string_free(p) };
    s
}

fn open(options: &str) -> (i32, *mut LseEngine, String) {
    let c = CString::new(options).unwrap();
    let mut e = std::ptr::dangling_mut::<LseEngine>(); // must be overwritten
    let mut err = null_mut();
    let rc = unsafe { lse_engine_open(c.as_ptr(), &mut e, &mut err) };
    let msg = if err.is_null() { String::new() } else { take(err) };
    (rc, e, msg)
}

#[test]
fn open_refuses_bad_options_with_a_message() {
    for (json, code, want) in [
        ("{", LSE_ERR_ARGUMENT, "not valid JSON"),
        (r#"{"model": ["a"]}"#, LSE_ERR_ARGUMENT, "model must be a string"),
        (r#"{"model": "x.gguf", "kv_len": "4096"}"#, LSE_ERR_ARGUMENT, "kv_len must be a positive integer"),
        (r#"{"model": "x.gguf", "no_cpu_fallback": "yes"}"#, LSE_ERR_ARGUMENT, "no_cpu_fallback"),
        (r#"{"model": "/no/such/dir/x.gguf"}"#, LSE_ERR_RUN, "not found"),
    ] {
        let (rc, e, msg) = open(json);
        assert_eq!(rc, code, "{json}: {msg}");
        assert!(e.is_null(), "{json}: handle not cleared");
        assert!(msg.contains(want), "{json}: {msg:?} lacks {want:?}");
    }
}

#[test]
fn null_pointers_are_errors() {
    let mut err = null_mut();
    let mut e = null_mut();
    assert_eq!(unsafe { lse_engine_open(std::ptr::null(), &mut e, &mut err) }, LSE_ERR_ARGUMENT);
    assert!(take(err).contains("options_json is NULL"));
    let opts = CString::new(r#"{"model": "x"}"#).unwrap();
    assert_eq!(unsafe { lse_engine_open(opts.as_ptr(), null_mut(), &mut err) }, LSE_ERR_ARGUMENT);
    assert!(take(err).contains("out"));
    assert_eq!(unsafe { lse_engine_open(opts.as_ptr(), null_mut(), null_mut()) }, LSE_ERR_ARGUMENT);

    let req = CString::new(r#"{"text": "x"}"#).unwrap();
    let mut out = std::ptr::dangling_mut::<c_char>();
    assert_eq!(unsafe { lse_perplexity(null_mut(), req.as_ptr(), &mut out, &mut err) }, LSE_ERR_ARGUMENT);
    assert!(out.is_null());
    assert!(take(err).contains("engine is NULL"));
    assert_eq!(unsafe { lse_perplexity(null_mut(), req.as_ptr(), null_mut(), &mut err) }, LSE_ERR_ARGUMENT);
    assert!(take(err).contains("json_out"));
    unsafe {
        lse_string_free(null_mut());
        lse_engine_close(null_mut());
    }
}

#[test]
fn request_errors_name_the_field() {
    for (json, want) in [
        (r#"{"text": 5}"#, "text"),
        (r#"{"text": "a", "ctx": "128"}"#, "ctx"),
        (r#"{"text": "a", "stride": 1.5}"#, "stride"),
        (r#"{"text": "a", "chunks": -1}"#, "chunks"),
        (r#"{"text": "a", "kld_top_k": "32"}"#, "kld_top_k"),
        (r#"{"text": "a", "kld_base_out": 1}"#, "kld_base_out"),
        (r#"{"text": "a", "include_token_ids": "yes"}"#, "include_token_ids"),
        (r#"{"tokens": "1 2 3"}"#, "tokens"),
        (r#"{"pairs": [{"prompt": "a"}]}"#, "response"),
        (r#"{"text": "a", "method": "window"}"#, "window"),
        (r#"{"text": "a", "ctxx": 2}"#, "ctxx"),
        (r#"{"text": "a", "tokens": [1]}"#, "exactly one"),
        ("[]", "object"),
        ("{\"text\": ", "not valid JSON"),
    ] {
        let e = parse_request(json).unwrap_err();
        assert!(e.contains(want), "{json}: {e:?} lacks {want:?}");
    }
    let r = parse_request(r#"{"text": "abc", "ctx": 128, "chunks": 3, "include_windows": true}"#).unwrap();
    assert_eq!((r.ctx, r.chunks, r.include_windows), (Some(128), Some(3), true));
}
