//! Server counters and gauges, exposed on `GET /metrics` in Prometheus' text format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

#[derive(Default)]
pub struct Metrics {
    pub requests: AtomicU64,
    pub requests_failed: AtomicU64,
    pub prompt_tokens: AtomicU64,
    /// Prompt tokens found in a kept session (prefix reuse), not run again.
    pub prompt_tokens_cached: AtomicU64,
    pub generated_tokens: AtomicU64,
    pub queue_depth: AtomicU64,
    pub busy_sequences: AtomicU64,
    pub forwards: AtomicU64,
    pub rows: AtomicU64,
    pub decode_rows: AtomicU64,
    pub prompt_rows: AtomicU64,
    pub max_rows: AtomicU64,
    /// Nanoseconds spent in steps that had decode rows.
    pub decode_step_ns: AtomicU64,
    pub scoring_requests: AtomicU64,
}

impl Metrics {
    /// Records one batched forward.
    pub fn step(&self, rows: usize, prompt_rows: usize, decode_rows: usize, ns: u64) {
        self.forwards.fetch_add(1, Relaxed);
        self.rows.fetch_add(rows as u64, Relaxed);
        self.prompt_rows.fetch_add(prompt_rows as u64, Relaxed);
        self.decode_rows.fetch_add(decode_rows as u64, Relaxed);
        self.max_rows.fetch_max(rows as u64, Relaxed);
        if decode_rows > 0 {
            self.decode_step_ns.fetch_add(ns, Relaxed);
        }
    }

    pub fn render(&self) -> String {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let forwards = g(&self.forwards);
        let rows_per_forward = if forwards > 0 { g(&self.rows) as f64 / forwards as f64 } else { 0.0 };
        let decode_s = g(&self.decode_step_ns) as f64 / 1e9;
        let decode_tps = if decode_s > 0.0 { g(&self.decode_rows) as f64 / decode_s } else { 0.0 };
        let mut s = String::new();
        let mut put = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(s, "# HELP lse_{name} {help}\n# TYPE lse_{name} {kind}\nlse_{name} {v}");
        };
        put("requests_total", "counter", "HTTP requests to the model endpoints.", g(&self.requests) as f64);
        put("requests_failed_total", "counter", "Model requests answered with an error.", g(&self.requests_failed) as f64);
        put("prompt_tokens_total", "counter", "Prompt tokens processed.", g(&self.prompt_tokens) as f64);
        put("prompt_tokens_cached_total", "counter", "Prompt tokens found in a kept session (prefix reuse), not run again.", g(&self.prompt_tokens_cached) as f64);
        put("tokens_predicted_total", "counter", "Tokens generated.", g(&self.generated_tokens) as f64);
        put("scoring_requests_total", "counter", "Perplexity and prompt log-prob jobs run.", g(&self.scoring_requests) as f64);
        put("queue_depth", "gauge", "Jobs waiting for the scheduler.", g(&self.queue_depth) as f64);
        put("busy_sequences", "gauge", "Sequences being generated now.", g(&self.busy_sequences) as f64);
        put("forwards_total", "counter", "Batched forward passes of the generation scheduler.", forwards as f64);
        put("batch_rows_total", "counter", "Rows fed through those forwards.", g(&self.rows) as f64);
        put("batch_prompt_rows_total", "counter", "Prompt rows among them.", g(&self.prompt_rows) as f64);
        put("batch_decode_rows_total", "counter", "Decode rows among them.", g(&self.decode_rows) as f64);
        put("rows_per_forward", "gauge", "Mean rows per batched forward.", rows_per_forward);
        put("rows_per_forward_max", "gauge", "Most rows in one batched forward.", g(&self.max_rows) as f64);
        put("decode_tokens_per_second", "gauge", "Decode rows per second of forwards that decoded.", decode_tps);
        s
    }
}
