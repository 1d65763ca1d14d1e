//! `include/lse/lse.h` against the crate: the same functions, parameter names and C types as the
//! `#[no_mangle] extern "C"` functions in `src/lib.rs`, and the same return-code values.
//! (`tests/c_api.rs` also checks the header against the symbols the built library exports.)

use std::collections::BTreeMap;
use std::path::PathBuf;

/// name -> (return type, [(parameter type, parameter name)]), types normalised (`char**`).
type Decls = BTreeMap<String, (String, Vec<(String, String)>)>;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `const char *` -> `const char*`, `lse_engine * *` -> `lse_engine**`.
fn norm(t: &str) -> String {
    let mut s = t.split_whitespace().collect::<Vec<_>>().join(" ");
    while s.contains(" *") || s.contains("* ") {
        s = s.replace(" *", "*").replace("* ", "*");
    }
    s
}

fn strip_c_comments(src: &str) -> String {
    let mut out = String::new();
    let mut rest = src;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), None) => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..].find("*/").expect("unterminated comment") + b + 4;
                rest = &rest[end..];
            }
            (Some(b), Some(l)) if b < l => {
                out.push_str(&rest[..b]);
                let end = rest[b + 2..].find("*/").expect("unterminated comment") + b + 4;
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
            }
            (None, None) => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// Function declarations `RET NAME(TYPE NAME, ...);` of the header (preprocessor lines dropped).
pub fn header_decls(header: &str) -> Decls {
    let text: String = strip_c_comments(header)
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Decls::new();
    for stmt in text.split(';') {
        let Some(open) = stmt.find('(') else { continue };
        let head = stmt[..open].rsplit(['{', '}']).next().unwrap().trim();
        if head.starts_with("typedef") || head.is_empty() {
            continue;
        }
        let split = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
        let (ret, name) = (norm(&head[..split]), head[split..].to_string());
        let close = stmt.rfind(')').expect("closing parenthesis");
        let params = stmt[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "void")
            .map(|p| {
                let s = p.rfind(|c: char| !(c.is_alphanumeric() || c == '_')).map_or(0, |i| i + 1);
                (norm(&p[..s]), p[s..].to_string())
            })
            .collect();
        assert!(out.insert(name.clone(), (ret, params)).is_none(), "{name} declared twice");
    }
    out
}

/// The C spelling of a Rust FFI type.
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        let c = c_type(inner);
        return if c.ends_with('*') { format!("{c} const*") } else { format!("const {c}*") };
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{}*", c_type(inner));
    }
    match t {
        "c_char" => "char".into(),
        "c_int" => "int".into(),
        "LseEngine" => "lse_engine".into(),
        other => panic!("no C spelling for Rust type {other}"),
    }
}

/// The `#[no_mangle] pub unsafe extern "C" fn` items of the crate source, in C spelling.
pub fn rust_decls(src: &str) -> Decls {
    let mut out = Decls::new();
    for part in src.split("#[no_mangle]").skip(1) {
        let fn_at = part.find("fn ").expect("fn after #[no_mangle]");
        assert!(part[..fn_at].contains("extern \"C\""), "#[no_mangle] fn without extern \"C\": {}", &part[..fn_at + 30]);
        let sig = &part[fn_at + 3..part.find('{').unwrap()];
        let open = sig.find('(').unwrap();
        let close = sig.rfind(')').unwrap();
        let name = sig[..open].trim().to_string();
        let params = sig[open + 1..close]
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (n, t) = p.split_once(':').expect("name: type");
                (norm(&c_type(t)), n.trim().to_string())
            })
            .collect();
        let ret = match sig[close + 1..].trim().strip_prefix("->") {
            Some(r) => c_type(r),
            None => "void".into(),
        };
        out.insert(name, (norm(&ret), params));
    }
    out
}

#[test]
fn header_declares_exactly_the_exported_functions() {
    let header = std::fs::read_to_string(repo().join("include/lse/lse.h")).unwrap();
    let src = std::fs::read_to_string(repo().join("crates/lse-capi/src/lib.rs")).unwrap();
    let h = header_decls(&header);
    let r = rust_decls(&src);
    assert_eq!(h.keys().collect::<Vec<_>>(), ["lse_embed", "lse_engine_close", "lse_engine_info", "lse_engine_open", "lse_generate", "lse_perplexity", "lse_string_free"]);
    assert_eq!(h, r, "header (left) and src/lib.rs (right) disagree");
    // SPEC §7, verbatim
    let spec = [
        ("lse_engine_open", "int", vec![("const char*", "options_json"), ("lse_engine**", "out"), ("char**", "err")]),
        (
            "lse_perplexity",
            "int",
            vec![("lse_engine*", "engine"), ("const char*", "request_json"), ("char**", "json_out"), ("char**", "err")],
        ),
        (
            "lse_generate",
            "int",
            vec![("lse_engine*", "engine"), ("const char*", "request_json"), ("char**", "json_out"), ("char**", "err")],
        ),
        (
            "lse_embed",
            "int",
            vec![("lse_engine*", "engine"), ("const char*", "request_json"), ("char**", "json_out"), ("char**", "err")],
        ),
        ("lse_string_free", "void", vec![("char*", "s")]),
        ("lse_engine_close", "void", vec![("lse_engine*", "engine")]),
    ];
    for (name, ret, params) in spec {
        let (hr, hp) = &h[name];
        assert_eq!(hr, ret, "{name}");
        let hp: Vec<(&str, &str)> = hp.iter().map(|(t, n)| (t.as_str(), n.as_str())).collect();
        assert_eq!(hp, params, "{name}");
    }
    assert!(header.contains("typedef struct lse_engine lse_engine;"));
}

#[test]
fn header_return_codes_match_the_crate() {
    let header = std::fs::read_to_string(repo().join("include/lse/lse.h")).unwrap();
    let define = |name: &str| -> i32 {
        let line = header.lines().find(|l| l.starts_with(&format!("#define {name} "))).unwrap_or_else(|| panic!("{name}"));
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    assert_eq!(define("LSE_OK"), lse::LSE_OK);
    assert_eq!(define("LSE_ERR_ARGUMENT"), lse::LSE_ERR_ARGUMENT);
    assert_eq!(define("LSE_ERR_RUN"), lse::LSE_ERR_RUN);
    assert_eq!(define("LSE_ERR_INTERNAL"), lse::LSE_ERR_INTERNAL);
}

#[test]
fn parsers_see_a_mismatch() {
    let h = header_decls("/* c */ int lse_x(const char *a, int **b);\nvoid lse_y(void);");
    assert_eq!(h["lse_x"], ("int".into(), vec![("const char*".into(), "a".into()), ("int**".into(), "b".into())]));
    assert_eq!(h["lse_y"], ("void".into(), vec![]));
    let r = rust_decls("#[no_mangle]\npub unsafe extern \"C\" fn lse_x(a: *const c_char, b: *mut *mut c_int) -> c_int {}");
    assert_eq!(r["lse_x"], h["lse_x"]);
    let r = rust_decls("#[no_mangle]\npub unsafe extern \"C\" fn lse_x(a: *mut c_char, b: *mut *mut c_int) -> c_int {}");
    assert_ne!(r["lse_x"], h["lse_x"]);
}
