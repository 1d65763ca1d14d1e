//! token_to_piece, detokenize and the end-of-generation set, checked against llama.cpp's rules:
//! its round-trip test for SentencePiece vocabularies (tests/test-tokenizer-1-spm.cpp), the
//! suites' texts coming back from their expected ids, and the EOG tokens llama.cpp lists.

mod common;

use lse_tokenizer::Tokenizer;

fn text(tok: &Tokenizer, ids: &[u32]) -> String {
    String::from_utf8_lossy(&tok.detokenize(ids, false, true)).into_owned()
}

#[test]
fn spm_pieces() {
    let tok = common::load(&common::vocab_path("ggml-vocab-llama-spm.gguf"));
    // <s> is CONTROL: rendered only with special
    assert_eq!(tok.token_to_piece(1, true), b"<s>");
    assert!(tok.token_to_piece(1, false).is_empty());
    // <0x0A> is a byte token
    assert_eq!(tok.token_text(13), Some("<0x0A>"));
    assert_eq!(tok.token_to_piece(13, false), b"\n");
    // a half character comes back as its byte
    assert_eq!(tok.token_text(0xE4 + 3), Some("<0xE4>"));
    assert_eq!(tok.token_to_piece(0xE4 + 3, false), [0xE4]);
    // ▁ is a space
    let the = tok.tokenize("the", false, false);
    assert_eq!(the.len(), 1);
    assert_eq!(tok.token_text(the[0]), Some("\u{2581}the"));
    assert_eq!(tok.token_to_piece(the[0], false), b" the");
    // out of range: nothing
    assert!(tok.token_to_piece(1 << 30, true).is_empty());
    // the space prefix is removed from the first piece, and BOS only when asked
    let ids = tok.tokenize("Hello world", true, false);
    assert_eq!(ids[0], 1);
    assert_eq!(tok.detokenize(&ids, false, true), b"<s> Hello world");
    assert_eq!(tok.detokenize(&ids, false, false), b" Hello world");
    // llama.cpp keeps the space when it drops the BOS (only a leading text token loses it)
    assert_eq!(tok.detokenize(&ids, true, false), b" Hello world");
    assert_eq!(tok.detokenize(&ids[1..], false, false), b"Hello world");
}

/// llama.cpp's test-tokenizer-1-spm: every token's text tokenizes back to itself, and every
/// codepoint survives tokenize + detokenize (U+2581 excepted).
#[test]
fn spm_round_trip_like_test_tokenizer_1() {
    let tok = common::load(&common::vocab_path("ggml-vocab-llama-spm.gguf"));
    for id in 0..tok.n_vocab() as u32 {
        let s = tok.detokenize(&[id], false, true);
        let Ok(s) = String::from_utf8(s.clone()) else {
            // llama.cpp passes the bytes on; a lone byte cannot be a Rust string
            continue;
        };
        let ids = tok.tokenize(&s, false, true);
        assert_eq!(tok.detokenize(&ids, false, true), s.as_bytes(), "token {id}");
    }
    for cp in (0..0x11_0000u32).filter(|c| !(0xD800..=0xDFFF).contains(c) && !(0x40000..=0xE0000).contains(c)) {
        let s = char::from_u32(cp).unwrap().to_string();
        let ids = tok.tokenize(&s, false, true);
        if cp != 9601 {
            assert_eq!(tok.detokenize(&ids, false, true), s.as_bytes(), "U+{cp:04X}");
        }
    }
}

fn suite(name: &str) -> (Tokenizer, Vec<(String, Vec<u32>)>) {
    let path = common::vocab_path(name);
    let tok = common::load(&path);
    let cases = common::read_suite(&path);
    (tok, cases)
}

/// Byte-level BPE and SentencePiece without llama.cpp's space clean-up give the text back.
#[test]
fn suites_detokenize_to_their_text() {
    for name in [
        "ggml-vocab-llama-spm.gguf",
        "ggml-vocab-qwen2.gguf",
        "ggml-vocab-qwen35.gguf",
    ] {
        let (tok, cases) = suite(name);
        for (text, ids) in &cases {
            assert_eq!(&self::text(&tok, ids), text, "{name}");
        }
    }
}

/// With the clean-up, " ," and the like lose their space; everything else comes back.
#[test]
fn clean_spaces_vocabularies() {
    for name in ["ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf"] {
        let (tok, cases) = suite(name);
        for (text, ids) in &cases {
            let got = self::text(&tok, ids);
            let squeezed = |s: &str| s.replace(' ', "");
            assert_eq!(squeezed(&got), squeezed(text), "{name}: {text:?}");
        }
        // a sentence with the patterns llama.cpp tidies
        let ids = tok.tokenize("Hello , world ! It 's ok", false, false);
        assert_eq!(self::text(&tok, &ids), "Hello, world! It's ok", "{name}");
    }
}

fn eog_texts(tok: &Tokenizer) -> Vec<String> {
    let mut v: Vec<String> = tok
        .eog_ids()
        .iter()
        .map(|&id| tok.token_text(id).unwrap().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn eog_sets() {
    let t = common::load(&common::vocab_path("ggml-vocab-llama-bpe.gguf"));
    // Llama 3.0 has no <|eom_id|>
    assert_eq!(eog_texts(&t), ["<|end_of_text|>", "<|eot_id|>"]);
    assert_eq!(t.token_text(t.eot_id().unwrap()), Some("<|eot_id|>"));
    assert_eq!(t.eom_id(), None);
    assert!(t.is_eog(t.eos_id().unwrap()));

    let t = common::load(&common::vocab_path("ggml-vocab-qwen2.gguf"));
    // this (Qwen1.5) vocabulary has no FIM tokens, and "</s>" is on llama.cpp's list
    assert_eq!(eog_texts(&t), ["</s>", "<|endoftext|>", "<|im_end|>"]);
    assert_eq!(t.token_text(t.eot_id().unwrap()), Some("<|im_end|>"));

    let t = common::load(&common::vocab_path("ggml-vocab-llama-spm.gguf"));
    assert_eq!(eog_texts(&t), ["</s>"]);
    assert_eq!(t.eot_id(), None);

    let t = common::load(&common::vocab_path("ggml-vocab-gpt-2.gguf"));
    assert_eq!(eog_texts(&t), ["<|endoftext|>"]);
}

#[test]
fn gpt2_pieces_are_bytes() {
    let t = common::load(&common::vocab_path("ggml-vocab-gpt-2.gguf"));
    let ids = t.tokenize(" héllo\n", false, false);
    let mut joined = Vec::new();
    for &id in &ids {
        joined.extend(t.token_to_piece(id, false));
    }
    assert_eq!(joined, " héllo\n".as_bytes());
    // a CONTROL token only with special
    let eos = t.eos_id().unwrap();
    assert_eq!(t.token_to_piece(eos, true), b"<|endoftext|>");
    assert!(t.token_to_piece(eos, false).is_empty());
}
