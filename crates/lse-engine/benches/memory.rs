//! Peak memory of scoring against its bound: `cargo bench -p lse-engine --bench memory`.
//! Scores 8 windows of 512 tokens the way `--perplexity` does (4 windows per 2048-row pass, LM head
//! over the scored rows with top-32) and prints the peak RSS (VmHWM) next to
//! max(file, packed weights) + KV + 100 MiB. `LSE_BENCH_MODEL` picks the model (default smollm2).

use lse_engine::{Engine, EngineOptions, RowRequest};

fn vm_hwm_kib() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn main() {
    let name = std::env::var("LSE_BENCH_MODEL").unwrap_or("smollm2".into());
    let Some(path) = lse_testdata::model(&name) else { return };
    let engine = Engine::load(&path, EngineOptions { threads: 2, ..Default::default() }).unwrap();
    let v = engine.n_vocab() as u32;
    let windows: Vec<Vec<u32>> = (0..8u32).map(|w| (0..512u32).map(|i| (i * 7919 + 13 + 977 * w) % v).collect()).collect();
    let positions: Vec<usize> = (256..511).collect();
    let rf = |at: &str| {
        let st = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let l: Vec<&str> = st.lines().filter(|l| l.starts_with("RssFile") || l.starts_with("RssAnon") || l.starts_with("VmHWM")).collect();
        if std::env::var_os("LSE_BENCH_DEBUG").is_some() { eprintln!("{at}: {l:?}"); }
    };
    rf("loaded");
    for pass in windows.chunks(4) {
        rf("pass");
        let views: Vec<(&[u32], &[usize])> = pass.iter().map(|w| (&w[..], &positions[..])).collect();
        for rows in engine.prefill_windows(&views).unwrap() {
            let ids: Vec<[u32; 1]> = (0..rows.n_rows).map(|i| [i as u32]).collect();
            let reqs: Vec<RowRequest> = ids.iter().map(|ids| RowRequest { ids, top_k: 32 }).collect();
            rf("forward");
            engine.head_reduce(&rows, &reqs).unwrap();
            rf("head");
        }
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss: Vec<&str> = status.lines().filter(|l| l.starts_with("RssAnon") || l.starts_with("RssFile")).collect();
    eprintln!("{name}: at the end {}", rss.join(", ").split_whitespace().collect::<Vec<_>>().join(" "));
    let (file, packed) = engine.weight_bytes();
    let kv = engine.session_bytes().unwrap().0 * 2048;
    let mib = |b: usize| b as f64 / (1 << 20) as f64;
    let bound = file.max(packed) + kv + (100 << 20);
    let peak = vm_hwm_kib() * 1024;
    println!(
        "{name}: peak RSS {:.0} MiB; file {:.0} MiB, packed {:.0} MiB, KV of one pass {:.0} MiB, logits block {:.0} MiB; bound max(file, packed) + KV + 100 MiB = {:.0} MiB ({})",
        mib(peak),
        mib(file),
        mib(packed),
        mib(kv),
        mib(lse_engine::HEAD_ROWS * lse_engine::head_slices(engine.n_vocab())[0].len() * 4),
        mib(bound),
        if peak <= bound { "within" } else { "over" }
    );
}
