//! The C API of LSE (SPEC §7): `include/lse/lse.h` over the shared library `liblse`.
//!
//! Seven functions, all `extern "C"` and exported unmangled:
//! - [`lse_engine_open`]: engine options JSON (SPEC §2 names without dashes) → a loaded engine handle;
//! - [`lse_engine_info`]: the model's facts, the report's `config` and the tokenizer's load notes;
//! - [`lse_perplexity`]: request JSON (SPEC §7 fields) → the SPEC §4 report as JSON text;
//! - [`lse_generate`]: generation request JSON → the `lse.generation` object as JSON text;
//! - [`lse_embed`]: embeddings request JSON → the `lse.embeddings` object as JSON text;
//! - [`lse_string_free`]: frees every string the library hands out (reports and error messages);
//! - [`lse_engine_close`]: frees the engine.
//!
//! Every entry point checks its pointers, never panics across the boundary (a panic is caught and
//! returned as an error), and returns 0 on success or one of the non-zero [`LSE_ERR_ARGUMENT`],
//! [`LSE_ERR_RUN`], [`LSE_ERR_INTERNAL`] with a one-line message. Calls on one engine are serialised
//! by a mutex inside the handle: a call waits for the one in flight. Progress output is off.

#![allow(clippy::missing_safety_doc)] // the safety contract is the C header's

mod ffi;

use ffi::{guard, Failure};
use lse_engine::OpenOptions;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::Mutex;

/// Success.
pub const LSE_OK: c_int = 0;
/// A NULL pointer, text that is not UTF-8 or JSON, a wrong field type or an invalid value.
pub const LSE_ERR_ARGUMENT: c_int = 1;
/// The model could not be loaded, or the run failed (too-short text, KLD base mismatch, I/O, engine).
pub const LSE_ERR_RUN: c_int = 2;
/// A bug inside the library (a panic), caught at the boundary; the message says where.
pub const LSE_ERR_INTERNAL: c_int = 3;

/// The engine handle behind the C type `lse_engine` (opaque to C).
pub struct LseEngine {
    /// Held for the whole of a `lse_perplexity` call: calls on one engine run one at a time.
    engine: Mutex<lse_engine::Engine>,
    /// What the engine was opened with.
    pub options: OpenOptions,
    /// `lse_engine_info`'s answer, fixed at open (it does not wait for a call in flight).
    info: String,
}

// The handle is shared by the C threads that call `lse_perplexity` on it at once.
const _: () = {
    const fn send_and_sync<T: Send + Sync>() {}
    send_and_sync::<LseEngine>()
};

fn c_str<'a>(p: *const c_char, what: &str) -> Result<&'a str, Failure> {
    if p.is_null() {
        return Err(Failure::argument(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string (header contract); checked non-NULL above.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|e| Failure::argument(format!("{what} is not valid UTF-8 (byte {})", e.valid_up_to())))
}

/// Opens a model. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_engine_open(options_json: *const c_char, out: *mut *mut LseEngine, err: *mut *mut c_char) -> c_int {
    guard(err, || {
        if out.is_null() {
            return Err(Failure::argument("lse_engine_open: out (lse_engine **) is NULL".into()));
        }
        // SAFETY: non-NULL, and the caller passes a writable pointer.
        unsafe { *out = std::ptr::null_mut() };
        let json = c_str(options_json, "lse_engine_open: options_json")?;
        let opts = OpenOptions::parse(json).map_err(Failure::argument)?;
        if std::fs::metadata(&opts.model).is_err() {
            return Err(Failure::run(format!("model {} not found (no such file or folder)", opts.model.display())));
        }
        let handle = Box::new(open(opts)?);
        // SAFETY: as above.
        unsafe { *out = Box::into_raw(handle) };
        Ok(())
    })
}

/// Loads the model of options `OpenOptions::parse` has checked.
fn open(options: OpenOptions) -> Result<LseEngine, Failure> {
    let engine = lse_engine::Engine::load(&options.model, options.engine.clone()).map_err(|e| Failure::run(e.to_string()))?;
    let info = info_json(&engine);
    Ok(LseEngine { engine: Mutex::new(engine), options, info })
}

/// The body every entry point on an engine shares: checks the pointers, runs `f` on the engine
/// handle and the request text (`None`: the call takes no request), and hands its JSON text out in
/// `*json_out`.
unsafe fn json_call(
    name: &str,
    engine: *mut LseEngine,
    request_json: Option<*const c_char>,
    json_out: *mut *mut c_char,
    err: *mut *mut c_char,
    f: impl FnOnce(&LseEngine, &str) -> Result<String, Failure>,
) -> c_int {
    guard(err, || {
        if json_out.is_null() {
            return Err(Failure::argument(format!("{name}: json_out (char **) is NULL")));
        }
        // SAFETY: non-NULL, writable (header contract).
        unsafe { *json_out = std::ptr::null_mut() };
        if engine.is_null() {
            return Err(Failure::argument(format!("{name}: engine is NULL (open one with lse_engine_open)")));
        }
        // SAFETY: a handle from lse_engine_open, not yet closed (header contract). Only shared access.
        let handle = unsafe { &*engine };
        let json = match request_json {
            Some(r) => c_str(r, &format!("{name}: request_json"))?,
            None => "",
        };
        let text = f(handle, json)?;
        // SAFETY: as above.
        unsafe { *json_out = ffi::to_c_string(&text) };
        Ok(())
    })
}

/// Scores a request. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_perplexity(
    engine: *mut LseEngine,
    request_json: *const c_char,
    json_out: *mut *mut c_char,
    err: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's pointers, checked in json_call (header contract).
    unsafe { json_call("lse_perplexity", engine, Some(request_json), json_out, err, perplexity) }
}

/// Generates from a prompt. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_generate(
    engine: *mut LseEngine,
    request_json: *const c_char,
    json_out: *mut *mut c_char,
    err: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's pointers, checked in json_call (header contract).
    unsafe { json_call("lse_generate", engine, Some(request_json), json_out, err, generate) }
}

/// Runs a generation request on the engine (waiting for any call in flight).
fn generate(handle: &LseEngine, json: &str) -> Result<String, Failure> {
    let req = lse_engine::GenerateRequest::from_json(json).map_err(Failure::argument)?;
    let engine = handle.engine.lock().unwrap_or_else(|p| p.into_inner());
    let report = engine.generate(&req).map_err(|e| Failure::run(e.to_string()))?;
    drop(engine);
    serde_json::to_string(&report).map_err(|e| Failure::internal(format!("cannot serialise the report: {e}")))
}

/// Embeds texts. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_embed(
    engine: *mut LseEngine,
    request_json: *const c_char,
    json_out: *mut *mut c_char,
    err: *mut *mut c_char,
) -> c_int {
    // SAFETY: the caller's pointers, checked in json_call (header contract).
    unsafe { json_call("lse_embed", engine, Some(request_json), json_out, err, embed) }
}

/// Runs an embeddings request on the engine (waiting for any call in flight).
fn embed(handle: &LseEngine, json: &str) -> Result<String, Failure> {
    let req = lse_engine::EmbedRequest::from_json(json).map_err(Failure::argument)?;
    let engine = handle.engine.lock().unwrap_or_else(|p| p.into_inner());
    let report = engine.embed_request(&req).map_err(|e| Failure::run(e.to_string()))?;
    drop(engine);
    serde_json::to_string(&report).map_err(|e| Failure::internal(format!("cannot serialise the report: {e}")))
}

/// What an engine is. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_engine_info(engine: *mut LseEngine, json_out: *mut *mut c_char, err: *mut *mut c_char) -> c_int {
    // SAFETY: the caller's pointers, checked in json_call (header contract).
    unsafe { json_call("lse_engine_info", engine, None, json_out, err, |h, _| Ok(h.info.clone())) }
}

/// The model's facts, the report's `config` and the tokenizer's load notes (the library prints
/// nothing, so they are said here).
fn info_json(engine: &lse_engine::Engine) -> String {
    let v = serde_json::json!({
        "object": "lse.engine",
        "architecture": engine.architecture(),
        "model_name": engine.model_name(),
        "n_vocab": engine.n_vocab(),
        "kv_capacity": engine.kv_capacity(),
        "config": lse_eval::Scorer::config_json(engine),
        "load_notes": engine.tokenizer().load_notes(),
    });
    v.to_string()
}

/// Parses a request object (SPEC §7 fields). Errors name the field.
pub fn parse_request(json: &str) -> Result<lse_eval::PerplexityRequest, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("request is not valid JSON: {e}"))?;
    lse_eval::PerplexityRequest::from_json(&v).map_err(|e| e.to_string())
}

/// Scores `json` on the engine (waiting for any call in flight) and returns the report's JSON text.
fn perplexity(handle: &LseEngine, json: &str) -> Result<String, Failure> {
    let req = parse_request(json).map_err(Failure::argument)?;
    // A panic inside an earlier call poisons the mutex; the engine holds no per-call state (every
    // window runs in a fresh session), so the next call may use it.
    let engine = handle.engine.lock().unwrap_or_else(|p| p.into_inner());
    let report = lse_eval::run_perplexity(&engine, &req, &mut lse_eval::NoProgress).map_err(|e| Failure::run(e.to_string()))?;
    drop(engine);
    serde_json::to_string(&report).map_err(|e| Failure::internal(format!("cannot serialise the report: {e}")))
}

/// Frees a string returned by the library. NULL is ignored. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_string_free(s: *mut c_char) {
    if s.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: `s` came from `to_c_string` (CString::into_raw) and is freed once (header contract).
        drop(unsafe { std::ffi::CString::from_raw(s) });
    });
}

/// Closes an engine and frees its memory. NULL is ignored. See `lse.h`.
#[no_mangle]
pub unsafe extern "C" fn lse_engine_close(engine: *mut LseEngine) {
    if engine.is_null() {
        return;
    }
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `engine` came from Box::into_raw in lse_engine_open and is closed once, with no call
        // in flight (header contract).
        drop(unsafe { Box::from_raw(engine) });
    }));
}
