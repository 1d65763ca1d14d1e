//! Feeds arbitrary bytes to the GGUF reader. Any panic, overflow or out-of-bounds access is a bug;
//! an accepted file must also be fully readable through the public API.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lse_gguf::{GgufFile, Value};

fn touch(v: &Value) -> usize {
    match v {
        Value::Array(items) => items.iter().map(touch).sum::<usize>() + 1,
        Value::String(s) => s.len(),
        other => other.as_f64().map_or(0, |x| x.is_nan() as usize),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    let mut n = 0usize;
    for (key, value) in f.metadata() {
        assert!(f.get(key).is_some());
        n = n.wrapping_add(touch(value));
    }
    for t in f.tensors() {
        assert_eq!(f.tensor_data(t).len() as u64, t.n_bytes);
        assert_eq!(f.tensor(&t.name), Some(t));
        assert_eq!(t.offset % f.alignment(), 0);
        n = n.wrapping_add(t.n_elements() as usize);
    }
    std::hint::black_box((n, f.architecture()));
});
