//! The shared synthetic models, vocab files and real models open with the expected contents.
//! Expected values were read from the files with gguf-py, an independent GGUF reader.

use lse_gguf::{GgmlType, GgufFile};

struct Synthetic {
    file: &'static str,
    arch: &'static str,
    n_kv: usize,
    n_tensors: usize,
    block_count: u64,
    embd_type: GgmlType,
    /// Absolute file offset and byte size of token_embd.weight.
    embd_at: u64,
    embd_bytes: u64,
}

const SYNTHETIC: &[Synthetic] = &[
    Synthetic {
        file: "llama-tiny.gguf",
        arch: "llama",
        n_kv: 25,
        n_tensors: 38,
        block_count: 4,
        embd_type: GgmlType::F16,
        embd_at: 726_336,
        embd_bytes: 4_096_000,
    },
    Synthetic {
        file: "llama-tiny-q8_0.gguf",
        arch: "llama",
        n_kv: 25,
        n_tensors: 38,
        block_count: 4,
        embd_type: GgmlType::Q8_0,
        embd_at: 726_336,
        embd_bytes: 2_176_000,
    },
    Synthetic {
        file: "llama-tiny-q4_0.gguf",
        arch: "llama",
        n_kv: 25,
        n_tensors: 38,
        block_count: 4,
        embd_type: GgmlType::Q4_0,
        embd_at: 726_336,
        embd_bytes: 1_152_000,
    },
    Synthetic {
        file: "qwen2-tiny.gguf",
        arch: "qwen2",
        n_kv: 23,
        n_tensors: 38,
        block_count: 3,
        embd_type: GgmlType::F16,
        embd_at: 726_176,
        embd_bytes: 4_096_000,
    },
    Synthetic {
        file: "qwen3-tiny.gguf",
        arch: "qwen3",
        n_kv: 25,
        n_tensors: 35,
        block_count: 3,
        embd_type: GgmlType::F16,
        embd_at: 726_144,
        embd_bytes: 4_096_000,
    },
    Synthetic {
        file: "gemma3-tiny.gguf",
        arch: "gemma3",
        n_kv: 31,
        n_tensors: 54,
        block_count: 4,
        embd_type: GgmlType::F16,
        embd_at: 727_584,
        embd_bytes: 4_096_000,
    },
    Synthetic {
        file: "qwen35-tiny.gguf",
        arch: "qwen35",
        n_kv: 34,
        n_tensors: 55,
        block_count: 4,
        embd_type: GgmlType::F16,
        embd_at: 727_744,
        embd_bytes: 4_096_000,
    },
];

fn open(rel: &str) -> GgufFile {
    let path = lse_testdata::shared(rel);
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every tensor's data is inside the file, sized by its shape and type.
fn check_tensor_table(f: &GgufFile) {
    for t in f.tensors() {
        let ne0 = t.dims.first().copied().unwrap_or(1) as usize;
        let rows: u64 = t.dims.iter().skip(1).product();
        let row = t.ggml_type.row_bytes(ne0).expect("whole blocks") as u64;
        assert_eq!(t.n_bytes, row * rows, "{}", t.name);
        assert_eq!(f.tensor_data(t).len() as u64, t.n_bytes, "{}", t.name);
        assert_eq!(t.offset % f.alignment(), 0);
    }
}

#[test]
fn synthetic_models_open() {
    for s in SYNTHETIC {
        let f = open(&format!("golden/synthetic/{}", s.file));
        assert_eq!(f.version(), 3, "{}", s.file);
        assert_eq!(f.alignment(), 32);
        assert_eq!(f.architecture(), Some(s.arch), "{}", s.file);
        assert_eq!(f.metadata().len(), s.n_kv, "{}", s.file);
        assert_eq!(f.tensors().len(), s.n_tensors, "{}", s.file);
        assert_eq!(
            f.get_u64(&format!("{}.block_count", s.arch)),
            Some(s.block_count),
            "{}",
            s.file
        );
        assert_eq!(
            f.get_u64(&format!("{}.embedding_length", s.arch)),
            Some(64),
            "{}",
            s.file
        );
        assert_eq!(f.get_str("tokenizer.ggml.model"), Some("llama"));
        let tokens = f.get_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!(tokens.len(), 32_000);
        assert_eq!(tokens[5].as_str(), Some("<0x02>"));
        let embd = f.tensor("token_embd.weight").unwrap();
        assert_eq!(embd.dims, [64, 32_000]);
        assert_eq!(embd.ggml_type, s.embd_type);
        assert_eq!(f.data_start() + embd.offset, s.embd_at, "{}", s.file);
        assert_eq!(embd.n_bytes, s.embd_bytes);
        check_tensor_table(&f);
    }
}

/// Values from llama-tiny's README row: 4 layers, 64 wide, 4 heads, 2 kv heads, ffn 192.
#[test]
fn llama_tiny_hyperparameters() {
    let f = open("golden/synthetic/llama-tiny.gguf");
    assert_eq!(f.get_u64("llama.block_count"), Some(4));
    assert_eq!(f.get_u64("llama.embedding_length"), Some(64));
    assert_eq!(f.get_u64("llama.attention.head_count"), Some(4));
    assert_eq!(f.get_u64("llama.attention.head_count_kv"), Some(2));
    assert_eq!(f.get_u64("llama.feed_forward_length"), Some(192));
    assert_eq!(f.get_f32("llama.rope.freq_base"), Some(500_000.0));
    assert_eq!(
        f.get_f32("llama.attention.layer_norm_rms_epsilon"),
        Some(1e-5)
    );
    let q = f.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(q.dims, [64, 64]);
    assert_eq!(q.ggml_type, GgmlType::F32);
    // The last tensor ends exactly at the end of the file (5,611,072 bytes).
    let end = f
        .tensors()
        .iter()
        .map(|t| f.data_start() + t.offset + t.n_bytes)
        .max();
    assert_eq!(end, Some(5_611_072));
}

#[test]
fn vocab_files_open() {
    // (file, architecture, tokenizer model, token count, token 5)
    let expect = [
        ("ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", 50_257, "&"),
        ("ggml-vocab-llama-bpe.gguf", "llama", "gpt2", 128_256, "&"),
        (
            "ggml-vocab-llama-spm.gguf",
            "llama",
            "llama",
            32_000,
            "<0x02>",
        ),
        ("ggml-vocab-qwen2.gguf", "qwen2", "gpt2", 151_936, "&"),
        ("ggml-vocab-qwen35.gguf", "qwen2", "gpt2", 151_936, "&"),
    ];
    for (file, arch, model, n, tok5) in expect {
        let f = open(&format!("data/vocab/{file}"));
        assert_eq!(f.architecture(), Some(arch), "{file}");
        assert_eq!(f.get_str("tokenizer.ggml.model"), Some(model), "{file}");
        let tokens = f.get_array("tokenizer.ggml.tokens").unwrap();
        assert_eq!(tokens.len(), n, "{file}");
        assert_eq!(tokens[5].as_str(), Some(tok5), "{file}");
        assert!(f.tensors().is_empty());
    }
}

#[test]
fn smollm2_opens() {
    let Some(path) = lse_testdata::model("smollm2") else {
        return;
    };
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.architecture(), Some("llama"));
    assert_eq!(f.tensors().len(), 272);
    assert_eq!(f.metadata().len(), 33);
    assert_eq!(f.get_u64("llama.block_count"), Some(30));
    assert_eq!(f.get_array("tokenizer.ggml.tokens").unwrap().len(), 49_152);
    let embd = &f.tensors()[0];
    assert_eq!(embd.name, "token_embd.weight");
    assert_eq!(embd.dims, [576, 49_152]);
    assert_eq!(embd.ggml_type, GgmlType::Q8_0);
    assert_eq!(f.data_start() + embd.offset, 1_785_664);
    assert_eq!(embd.n_bytes, 30_081_024);
    check_tensor_table(&f);
}

#[test]
fn other_real_models_open() {
    // (model, architecture, tensors, token count)
    for (name, arch, n_tensors, n_tokens) in [
        ("gemma3", "gemma3", 236, 262_144),
        ("qwen25coder", "qwen2", 291, 151_936),
    ] {
        let Some(path) = lse_testdata::model(name) else {
            continue;
        };
        // Timing is printed for information only (speed belongs in benchmarks).
        let mut took = std::time::Duration::MAX;
        for _ in 0..2 {
            let start = std::time::Instant::now();
            drop(GgufFile::open(&path).unwrap());
            took = took.min(start.elapsed());
        }
        let start = std::time::Instant::now();
        let f = GgufFile::open(&path).unwrap();
        let took = took.min(start.elapsed());
        eprintln!("{name}: opened in {took:?}");
        assert_eq!(f.architecture(), Some(arch));
        assert_eq!(f.tensors().len(), n_tensors);
        assert_eq!(
            f.get_array("tokenizer.ggml.tokens").unwrap().len(),
            n_tokens
        );
        check_tensor_table(&f);
    }
}
