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
    /// Running sequences summed over the forwards (llama-server's busy slots per decode).
    pub busy_at_forwards: AtomicU64,
    /// The longest sequence seen (prompt and generated tokens).
    pub longest_sequence: AtomicU64,
    /// Finished generations' prompt tokens not found in a kept session, and their times from
    /// the start in the running batch to the first token (llama-server's prompt timings).
    pub timed_prompt_tokens: AtomicU64,
    pub prompt_ns: AtomicU64,
    /// Finished generations' tokens and their times from the first token to the end.
    pub timed_predicted_tokens: AtomicU64,
    pub predicted_ns: AtomicU64,
}

impl Metrics {
    /// Records one batched forward of `busy` running sequences.
    pub fn step(&self, busy: usize, rows: usize, prompt_rows: usize, decode_rows: usize, ns: u64) {
        self.forwards.fetch_add(1, Relaxed);
        self.busy_at_forwards.fetch_add(busy as u64, Relaxed);
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
        self.render_llamacpp(&mut s);
        s
    }

    /// Records a finished generation's tokens and timings.
    pub fn finished(&self, new_prompt_tokens: usize, prompt_seconds: f64, completion_tokens: usize, predicted_seconds: f64) {
        self.timed_prompt_tokens.fetch_add(new_prompt_tokens as u64, Relaxed);
        self.prompt_ns.fetch_add((prompt_seconds * 1e9) as u64, Relaxed);
        self.timed_predicted_tokens.fetch_add(completion_tokens as u64, Relaxed);
        self.predicted_ns.fetch_add((predicted_seconds * 1e9) as u64, Relaxed);
    }

    /// llama-server's series (`llamacpp:*`, as its `--metrics` writes them), so that dashboards
    /// made for it read LSE too. Its prompt and generation times are per sequence (start to first
    /// token, first token to end), summed when a generation finishes.
    fn render_llamacpp(&self, s: &mut String) {
        let g = |a: &AtomicU64| a.load(Relaxed);
        let per = |n: f64, d: f64| if d > 0.0 { n / d } else { 0.0 };
        let (prompt_s, predicted_s) = (g(&self.prompt_ns) as f64 / 1e9, g(&self.predicted_ns) as f64 / 1e9);
        let mut put = |name: &str, kind: &str, help: &str, v: f64| {
            let _ = writeln!(s, "# HELP llamacpp:{name} {help}\n# TYPE llamacpp:{name} {kind}\nllamacpp:{name} {v}");
        };
        let uncached = g(&self.prompt_tokens).saturating_sub(g(&self.prompt_tokens_cached));
        put("prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens.", uncached as f64);
        put("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache.", g(&self.prompt_tokens_cached) as f64);
        put("prompt_seconds_total", "counter", "Total time spent processing prompts.", prompt_s);
        put("tokens_predicted_total", "counter", "Number of generation tokens processed.", g(&self.generated_tokens) as f64);
        put("tokens_predicted_seconds_total", "counter", "Total time spent generating tokens.", predicted_s);
        put("n_decode_total", "counter", "Total number of batched forwards.", g(&self.forwards) as f64);
        put("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation).", g(&self.longest_sequence) as f64);
        put("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", per(g(&self.timed_prompt_tokens) as f64, prompt_s));
        put("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", per(g(&self.timed_predicted_tokens) as f64, predicted_s));
        put("requests_processing", "gauge", "Number of requests processing.", g(&self.busy_sequences) as f64);
        put("requests_deferred", "gauge", "Number of requests deferred.", g(&self.queue_depth) as f64);
        put("n_busy_slots_per_decode", "gauge", "Average number of busy slots per batched forward.", per(g(&self.busy_at_forwards) as f64, g(&self.forwards) as f64));
    }
}
