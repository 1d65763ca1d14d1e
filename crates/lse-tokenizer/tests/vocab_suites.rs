//! llama.cpp's tokenizer test suites (data/vocab/*.inp / *.out): every input must tokenize to the
//! expected ids with add_special = false, parse_special = false.

mod common;

fn run_suite(name: &str) {
    let path = common::vocab_path(name);
    let tok = common::load(&path);
    let inp = std::fs::read_to_string(format!("{}.inp", path.display())).expect("suite inputs");
    let out = std::fs::read_to_string(format!("{}.out", path.display())).expect("suite outputs");
    let mut inputs: Vec<&str> = inp.split("\n__ggml_vocab_test__\n").collect();
    // the file ends with a separator
    if inputs.last() == Some(&"") {
        inputs.pop();
    }
    let expected: Vec<Vec<u32>> = out
        .lines()
        .map(|l| l.split_whitespace().map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(
        expected.len() >= inputs.len(),
        "{name}: {} inputs, {} outputs",
        inputs.len(),
        expected.len()
    );
    let mut pass = 0;
    let mut first_fail = None;
    for (i, text) in inputs.iter().enumerate() {
        let got = tok.tokenize(text, false, false);
        if got == expected[i] {
            pass += 1;
        } else if first_fail.is_none() {
            first_fail = Some(format!(
                "input {i} {text:?}: got {got:?} want {:?}",
                expected[i]
            ));
        }
    }
    println!("{name}: {pass}/{} inputs match", inputs.len());
    if let Some(f) = first_fail {
        panic!(
            "{name}: {pass}/{} inputs match; first mismatch: {f}",
            inputs.len()
        );
    }
}

#[test]
fn suite_gpt2() {
    run_suite("ggml-vocab-gpt-2.gguf");
}

#[test]
fn suite_llama_bpe() {
    run_suite("ggml-vocab-llama-bpe.gguf");
}

#[test]
fn suite_llama_spm() {
    run_suite("ggml-vocab-llama-spm.gguf");
}

#[test]
fn suite_qwen2() {
    run_suite("ggml-vocab-qwen2.gguf");
}

#[test]
fn suite_qwen35() {
    run_suite("ggml-vocab-qwen35.gguf");
}
