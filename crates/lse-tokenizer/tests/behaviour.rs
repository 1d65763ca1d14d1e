//! Loading rules, special-token handling and token bytes.

mod common;

use lse_gguf::{GgufFile, GgufWriter, Value};
use lse_tokenizer::{attr, Tokenizer, TokenizerError};

fn strings(v: &[&str]) -> Value {
    Value::Array(v.iter().map(|s| Value::String(s.to_string())).collect())
}

/// A tiny byte-level BPE vocabulary with the given pre-type.
fn tiny_bpe(pre: Option<&str>) -> Result<Tokenizer, TokenizerError> {
    tiny_bpe_with(pre, &[])
}

/// [`tiny_bpe`] with more metadata.
fn tiny_bpe_with(pre: Option<&str>, extra: &[(&str, Value)]) -> Result<Tokenizer, TokenizerError> {
    let map = |b: u8| -> String {
        // GPT-2 characters of the bytes used below
        match b {
            b' ' => "\u{120}".to_string(),
            _ => (b as char).to_string(),
        }
    };
    let mut tokens: Vec<String> = [b'a', b'b', b' '].iter().map(|&b| map(b)).collect();
    tokens.push("ab".into());
    tokens.push("\u{120}ab".into());
    tokens.push("<|end|>".into());
    let mut types = vec![Value::I32(1); tokens.len()];
    *types.last_mut().unwrap() = Value::I32(3);
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", Value::String("llama".into()));
    w.add_kv("tokenizer.ggml.model", Value::String("gpt2".into()));
    if let Some(p) = pre {
        w.add_kv("tokenizer.ggml.pre", Value::String(p.into()));
    }
    w.add_kv(
        "tokenizer.ggml.tokens",
        Value::Array(tokens.iter().map(|s| Value::String(s.clone())).collect()),
    );
    w.add_kv("tokenizer.ggml.token_type", Value::Array(types));
    w.add_kv("tokenizer.ggml.merges", strings(&["a b", "\u{120} ab"]));
    w.add_kv("tokenizer.ggml.bos_token_id", Value::U32(5));
    for (k, v) in extra {
        w.add_kv(*k, v.clone());
    }
    let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
    Tokenizer::from_gguf(&f)
}

/// A special token id past the vocabulary is set aside for the default, and said so (llama.cpp
/// warns "bad special token" and uses its default id).
#[test]
fn special_ids_outside_the_vocabulary_are_noted() {
    assert!(tiny_bpe(Some("gpt-2")).unwrap().load_notes().is_empty());
    let tok = tiny_bpe_with(Some("gpt-2"), &[("tokenizer.ggml.eos_token_id", Value::U32(99)), ("tokenizer.ggml.eot_token_id", Value::U32(4))]).unwrap();
    assert_eq!(tok.eot_id(), Some(4));
    assert_eq!(tok.load_notes(), ["tokenizer.ggml.eos_token_id = 99 is outside the vocabulary of 6 tokens; using none"]);
}

#[test]
fn unknown_pre_type_is_refused_by_name() {
    let err = tiny_bpe(Some("bogus-pre")).err().expect("refused");
    assert!(
        matches!(err, TokenizerError::UnknownPreType(ref p) if p == "bogus-pre"),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("'bogus-pre'") && !msg.contains('\n'), "{msg}");
}

#[test]
fn unknown_pre_type_in_a_real_vocabulary_is_refused() {
    // Rename the pre-type of the qwen2 vocabulary in place (same length, so offsets hold).
    let mut bytes = std::fs::read(common::vocab_path("ggml-vocab-qwen2.gguf")).unwrap();
    let key = b"tokenizer.ggml.pre";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("pre key")
        + key.len();
    // type (u32 = 8), length (u64 = 5), "qwen2"
    assert_eq!(&bytes[at + 12..at + 17], b"qwen2");
    bytes[at + 12..at + 17].copy_from_slice(b"qwenX");
    let f = GgufFile::from_bytes(bytes).unwrap();
    let err = Tokenizer::from_gguf(&f).err().expect("refused");
    assert!(err.to_string().contains("'qwenX'"), "{err}");
}

#[test]
fn tiny_bpe_merges_and_specials() {
    let tok = tiny_bpe(Some("gpt-2")).unwrap();
    assert!(!tok.add_bos());
    assert_eq!(tok.tokenize("ab ab", false, false), vec![3, 4]);
    assert_eq!(tok.tokenize("ba", false, false), vec![1, 0]);
    // control text is plain text unless parse_special
    assert_eq!(tok.tokenize("<|end|>", false, true), vec![5]);
    assert_ne!(tok.tokenize("<|end|>", false, false), vec![5]);
    assert_eq!(tok.token_bytes(4), b" ab");
    // no pre-type: llama.cpp's default rules
    assert_eq!(
        tiny_bpe(None).unwrap().tokenize("ab ab", false, false),
        vec![3, 4]
    );
}

#[test]
fn add_bos_defaults_and_overrides() {
    let cases = [
        ("ggml-vocab-gpt-2.gguf", false),
        ("ggml-vocab-llama-bpe.gguf", true),
        ("ggml-vocab-llama-spm.gguf", true),
        ("ggml-vocab-qwen2.gguf", false),
        ("ggml-vocab-qwen35.gguf", false),
    ];
    for (name, want) in cases {
        let tok = common::load(&common::vocab_path(name));
        assert_eq!(tok.add_bos(), want, "{name}");
        let ids = tok.tokenize("Hello", true, false);
        assert_eq!(
            ids.first() == tok.bos_id().as_ref(),
            want,
            "{name}: {ids:?}"
        );
    }
}

#[test]
fn control_tokens_only_with_parse_special_user_defined_always() {
    let tok = common::load(&common::vocab_path("ggml-vocab-qwen2.gguf"));
    let im_start = 151644;
    assert_ne!(tok.token_attr(im_start) & attr::CONTROL, 0);
    assert_eq!(tok.tokenize("<|im_start|>", false, true), vec![im_start]);
    assert!(!tok
        .tokenize("x<|im_start|>y", false, false)
        .contains(&im_start));
    // a USER_DEFINED token is split out even with parse_special = false
    let pad = (0..tok.n_vocab() as u32)
        .find(|&id| tok.token_attr(id) == attr::USER_DEFINED)
        .expect("a user-defined token");
    let text = format!("a{}b", tok.token_text(pad).unwrap());
    let ids = tok.tokenize(&text, false, false);
    assert!(ids.contains(&pad), "{text:?} -> {ids:?}");
    assert_eq!(ids.len(), 3, "{ids:?}");
}

#[test]
fn token_bytes_round_trip_bpe() {
    let text = common::read_text("data/tokenizer-cases.txt");
    for name in [
        "ggml-vocab-gpt-2.gguf",
        "ggml-vocab-llama-bpe.gguf",
        "ggml-vocab-qwen2.gguf",
        "ggml-vocab-qwen35.gguf",
    ] {
        let tok = common::load(&common::vocab_path(name));
        let ids = tok.tokenize(&text, false, false);
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| tok.token_bytes(id).to_vec())
            .collect();
        assert!(bytes == text.as_bytes(), "{name}: decoded text differs");
    }
}

#[test]
fn token_bytes_spm() {
    let tok = common::load(&common::vocab_path("ggml-vocab-llama-spm.gguf"));
    let ids = tok.tokenize("Hello world\n", false, false);
    let bytes: Vec<u8> = ids
        .iter()
        .flat_map(|&id| tok.token_bytes(id).to_vec())
        .collect();
    // the SentencePiece space prefix comes back as a leading space
    assert_eq!(bytes, b" Hello world\n");
    assert_eq!(tok.token_bytes(13), b"\n"); // <0x0A>
    assert_eq!(tok.token_bytes(1), b"<s>");
    assert_eq!(tok.token_bytes(u32::MAX), b"");
}

#[test]
fn empty_text() {
    let spm = common::load(&common::vocab_path("ggml-vocab-llama-spm.gguf"));
    assert_eq!(spm.tokenize("", false, false), Vec::<u32>::new());
    assert_eq!(spm.tokenize("", true, false), vec![1]);
}

/// A tokenizer model llama.cpp does not know is refused in one line naming it; one it knows but
/// this crate does not implement is refused as such.
#[test]
fn unknown_and_unsupported_models_are_refused_by_name() {
    for (model, known) in [("sentencepiece-x", false), ("plamo2", true), ("no_vocab", true)] {
        let mut w = GgufWriter::new();
        w.add_kv("general.architecture", Value::String("llama".into()));
        w.add_kv("tokenizer.ggml.model", Value::String(model.into()));
        w.add_kv("tokenizer.ggml.tokens", strings(&["a", "b"]));
        let f = GgufFile::from_bytes(w.to_bytes().unwrap()).unwrap();
        let err = Tokenizer::from_gguf(&f).err().expect("refused");
        let msg = err.to_string();
        assert!(msg.contains(&format!("'{model}'")) && !msg.contains('\n'), "{msg}");
        assert_eq!(matches!(err, TokenizerError::UnsupportedModel(_)), known, "{msg}");
    }
}
