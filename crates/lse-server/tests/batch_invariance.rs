//! The perplexity report does not depend on how the windows are split into passes and launches:
//! mean_nll and every window's nll_sum are bit-identical for --batch-size 512, 1024, 2048 and
//! --ubatch-size 128, 512 (4 windows of 512 share a 2048-row pass).

use serde_json::Value;
use std::process::Command;

fn report(model: &std::path::Path, batch: &str, ubatch: &str) -> Value {
    let text = lse_testdata::data("wiki.test.raw");
    let o = Command::new(env!("CARGO_BIN_EXE_lse-server"))
        .arg("--model")
        .arg(model)
        .arg("--perplexity")
        .arg(&text)
        .args(["--perplexity-chunks", "4", "--perplexity-windows", "--threads", "2", "--quiet"])
        .args(["--batch-size", batch, "--ubatch-size", ubatch])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn numbers(r: &Value) -> Vec<u64> {
    let mut v = vec![r["mean_nll"].as_f64().unwrap().to_bits()];
    v.extend(r["windows"].as_array().unwrap().iter().map(|w| w["nll_sum"].as_f64().unwrap().to_bits()));
    v
}

#[test]
fn report_is_identical_for_every_batch_split() {
    let Some(model) = lse_testdata::model("smollm2") else { return };
    let want = numbers(&report(&model, "2048", "512"));
    assert_eq!(want.len(), 5);
    for (b, ub) in [("512", "512"), ("1024", "512"), ("2048", "128"), ("1024", "128")] {
        let got = report(&model, b, ub);
        assert_eq!(got["config"]["batch_size"].as_u64().unwrap().to_string(), b);
        assert!(numbers(&got) == want, "--batch-size {b} --ubatch-size {ub}: report differs");
    }
}
