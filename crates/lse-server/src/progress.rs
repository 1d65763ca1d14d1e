//! Progress on stderr (SPEC §9): a redrawn bar on a terminal, a plain line about every 10 s otherwise.

use lse_eval::{Progress, ProgressInfo};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct StderrProgress {
    tty: bool,
    last: Option<Instant>,
    drew: bool,
}

impl StderrProgress {
    pub fn new() -> StderrProgress {
        StderrProgress { tty: std::io::stderr().is_terminal(), last: None, drew: false }
    }
}

fn hms(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress for StderrProgress {
    fn update(&mut self, p: &ProgressInfo) {
        let now = Instant::now();
        let every = if self.tty { Duration::from_millis(200) } else { Duration::from_secs(10) };
        let done = p.windows_done == p.windows_total;
        match self.last {
            None => {
                self.last = Some(now);
                if !self.tty {
                    return;
                }
            }
            Some(t) if now.duration_since(t) < every && !(done && self.tty) => return,
            _ => self.last = Some(now),
        }
        let rate = if p.elapsed_seconds > 0.0 { p.tokens_done as f64 / p.elapsed_seconds } else { 0.0 };
        let eta = if rate > 0.0 { (p.tokens_total - p.tokens_done.min(p.tokens_total)) as f64 / rate } else { f64::NAN };
        let eta = if eta.is_finite() { hms(eta) } else { "?".into() };
        let mut err = std::io::stderr().lock();
        if self.tty {
            let width = 30;
            let filled = (width * p.windows_done).checked_div(p.windows_total).unwrap_or(width).min(width);
            let _ = write!(
                err,
                "\r[{}{}] {}/{} windows  {:.0} tok/s  ETA {}   ",
                "#".repeat(filled),
                ".".repeat(width - filled),
                p.windows_done,
                p.windows_total,
                rate,
                eta
            );
            self.drew = true;
        } else {
            let _ = writeln!(
                err,
                "lse-server: {}/{} windows, {} tokens, {:.0} tok/s, ETA {}",
                p.windows_done, p.windows_total, p.tokens_done, rate, eta
            );
        }
        let _ = err.flush();
    }

    fn finish(&mut self) {
        if self.tty && self.drew {
            let _ = writeln!(std::io::stderr());
            self.drew = false;
        }
    }
}
