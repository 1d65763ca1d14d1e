//! The boundary: results to status codes, messages to C strings, panics caught.

use crate::{LSE_ERR_ARGUMENT, LSE_ERR_INTERNAL, LSE_ERR_RUN, LSE_OK};
use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

// `catch_unwind` only works when panics unwind: a `panic = "abort"` build would let a bug take the
// host process down, so such a build does not compile.
const _: () = assert!(cfg!(panic = "unwind"), "lse-capi must be built with panic = \"unwind\"");

/// Why a call failed: its status code and one line for the caller.
#[derive(Debug)]
pub struct Failure {
    pub code: c_int,
    pub message: String,
}

/// Failures name options as the request and engine options objects do (the checks word them as flags).
impl Failure {
    pub fn argument(message: String) -> Failure {
        Failure { code: LSE_ERR_ARGUMENT, message: lse_eval::in_field_terms(&message) }
    }
    pub fn run(message: String) -> Failure {
        Failure { code: LSE_ERR_RUN, message: lse_eval::in_field_terms(&message) }
    }
    pub fn internal(message: String) -> Failure {
        Failure { code: LSE_ERR_INTERNAL, message }
    }
}

/// A C copy of `s` (interior NULs, which JSON text never holds, become U+FFFD) that
/// `lse_string_free` frees.
pub fn to_c_string(s: &str) -> *mut c_char {
    let c = CString::new(s).unwrap_or_else(|_| CString::new(s.replace('\0', "\u{FFFD}")).expect("no NUL left"));
    c.into_raw()
}

/// One line: line breaks inside a message become "; ".
fn one_line(s: &str) -> String {
    s.split(['\n', '\r']).map(str::trim_end).filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join("; ")
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".into())
}

/// Runs an entry point's body: `*err` is set to NULL first, then to the message on failure; a panic
/// becomes `LSE_ERR_INTERNAL`. `err` may be NULL (no message wanted).
pub fn guard(err: *mut *mut c_char, body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    if !err.is_null() {
        // SAFETY: non-NULL and writable (header contract).
        unsafe { *err = std::ptr::null_mut() };
    }
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return LSE_OK,
        Ok(Err(f)) => f,
        Err(payload) => {
            let msg = panic_message(payload.as_ref());
            // dropping a payload can itself panic; never let that unwind into C
            let _ = catch_unwind(AssertUnwindSafe(move || drop(payload)));
            Failure::internal(format!("internal error (a bug in liblse): {msg}"))
        }
    };
    if !err.is_null() {
        let line = one_line(&failure.message);
        let p = catch_unwind(|| to_c_string(&line)).unwrap_or(std::ptr::null_mut());
        // SAFETY: as above.
        unsafe { *err = p };
    }
    failure.code
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn take(p: *mut c_char) -> String {
        assert!(!p.is_null());
        let s = unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_string();
        unsafe { crate::lse_string_free(p) };
        s
    }

    #[test]
    fn ok_clears_err() {
        let mut err: *mut c_char = std::ptr::dangling_mut::<c_char>();
        assert_eq!(guard(&mut err, || Ok(())), LSE_OK);
        assert!(err.is_null());
    }

    #[test]
    fn failure_sets_code_and_one_line() {
        let mut err = std::ptr::null_mut();
        let rc = guard(&mut err, || Err(Failure::run("first\nsecond\r\n".into())));
        assert_eq!(rc, LSE_ERR_RUN);
        assert_eq!(take(err), "first; second");
    }

    #[test]
    fn panic_is_caught() {
        let mut err = std::ptr::null_mut();
        let rc = guard(&mut err, || panic!("boom {}", 7));
        assert_eq!(rc, LSE_ERR_INTERNAL);
        let m = take(err);
        assert!(m.contains("boom 7") && m.contains("bug"), "{m}");
        let rc = guard(std::ptr::null_mut(), || std::panic::panic_any(42u32));
        assert_eq!(rc, LSE_ERR_INTERNAL);
    }

    #[test]
    fn nul_inside_a_message() {
        assert_eq!(take(to_c_string("a\0b")), "a\u{FFFD}b");
    }
}
