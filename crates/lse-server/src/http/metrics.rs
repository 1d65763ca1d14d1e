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
    /// The most tokens one sequence has held in its KV cache.
    pub longest_sequence: AtomicU64,
    /// Nanoseconds spent in forwards that fed prompt rows.
    pub prompt_step_ns: AtomicU64,
    /// Finished generations' times from their first token to their end.
    pub predicted_ns: AtomicU64,
    /// The same prompt and generation tallies since the last scrape (llama-server's rate
    /// gauges average over the time between two scrapes).
    pub window: SinceScrape,
}

/// Prompt rows and their forwards' time, generation steps and their time, since the last scrape.
#[derive(Default)]
pub struct SinceScrape {
    prompt_rows: AtomicU64,
    prompt_ns: AtomicU64,
    predicted_steps: AtomicU64,
    predicted_ns: AtomicU64,
}

impl Metrics {
    /// Records one batched forward of `busy` running sequences.
    pub fn step(&self, busy: usize, rows: usize, prompt_rows: usize, decode_rows: usize, ns: u64) {
        self.forwards.fetch_add(1, Relaxed);
        self.busy_at_forwards.fetch_add(busy as u64, Relaxed);
        if prompt_rows > 0 {
            self.prompt_step_ns.fetch_add(ns, Relaxed);
            self.window.prompt_rows.fetch_add(prompt_rows as u64, Relaxed);
            self.window.prompt_ns.fetch_add(ns, Relaxed);
        }
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
        let mut put = |name: &str, kind: &str, help: &str, v: f64| series(&mut s, "lse_", name, kind, help, v);
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

    /// Records a finished generation: its tokens and the time from its first to its last.
    pub fn finished(&self, completion_tokens: usize, predicted_seconds: f64) {
        // the first token comes with the prompt's last forward, as llama-server counts it
        let (steps, ns) = (completion_tokens.saturating_sub(1) as u64, (predicted_seconds * 1e9) as u64);
        self.predicted_ns.fetch_add(ns, Relaxed);
        self.window.predicted_steps.fetch_add(steps, Relaxed);
        self.window.predicted_ns.fetch_add(ns, Relaxed);
    }

    /// llama-server's series (`llamacpp:*`, as its `--metrics` writes them, less the speculative
    /// decoding ones), so that dashboards made for it read LSE too: prompt tokens are the rows
    /// the forwards fed and their time the forwards' wall time; generation time runs per
    /// sequence from its first token to its end; the two rates cover the time since the last
    /// scrape, which restarts them.
    fn render_llamacpp(&self, s: &mut String) {
        let g = |a: &AtomicU64| a.load(Relaxed) as f64;
        let w = &self.window;
        let rate = |n: &AtomicU64, ns: &AtomicU64| {
            let (n, ns) = (n.swap(0, Relaxed) as f64, ns.swap(0, Relaxed) as f64);
            if ns > 0.0 { n * 1e9 / ns } else { 0.0 }
        };
        let mut put = |name: &str, kind: &str, help: &str, v: f64| series(s, "llamacpp:", name, kind, help, v);
        put("prompt_tokens_total", "counter", "Number of prompt tokens processed, excluding cached tokens.", g(&self.prompt_rows));
        put("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from the cache.", g(&self.prompt_tokens_cached));
        put("prompt_seconds_total", "counter", "Total time spent processing prompts.", g(&self.prompt_step_ns) / 1e9);
        put("tokens_predicted_total", "counter", "Number of generation tokens processed.", g(&self.generated_tokens));
        put("tokens_predicted_seconds_total", "counter", "Total time spent generating tokens.", g(&self.predicted_ns) / 1e9);
        put("n_decode_total", "counter", "Total number of batched forwards.", g(&self.forwards));
        put("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation).", g(&self.longest_sequence));
        put("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", rate(&w.prompt_rows, &w.prompt_ns));
        put("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", rate(&w.predicted_steps, &w.predicted_ns));
        put("requests_processing", "gauge", "Number of requests processing.", g(&self.busy_sequences));
        put("requests_deferred", "gauge", "Number of requests deferred.", g(&self.queue_depth));
        let forwards = g(&self.forwards);
        put("n_busy_slots_per_decode", "gauge", "Average number of busy slots per batched forward.", if forwards > 0.0 { g(&self.busy_at_forwards) / forwards } else { 0.0 });
    }
}

/// One Prometheus series: its help and type lines, then its value.
fn series(s: &mut String, prefix: &str, name: &str, kind: &str, help: &str, v: f64) {
    let _ = writeln!(s, "# HELP {prefix}{name} {help}\n# TYPE {prefix}{name} {kind}\n{prefix}{name} {v}");
}
