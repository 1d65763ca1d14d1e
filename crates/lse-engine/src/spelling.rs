//! Checks word their messages with the CLI's flags; the JSON front ends (C API, Python, HTTP) name
//! the same options by their fields. [`respell`] swaps one spelling for the other, so that each
//! check is written once and each front end still speaks its caller's terms.

/// The engine options' flags and their fields in the engine options object ([`crate::OpenOptions`]).
pub const ENGINE_FIELDS: &[(&str, &str)] = &[
    ("--threads", "threads"),
    ("--batch-size", "batch_size"),
    ("--ubatch-size", "ubatch_size"),
    ("--kv-len", "kv_len"),
    ("--kv-cache-dtype", "kv_cache_dtype"),
    ("--simd", "simd"),
    ("--dialect", "dialect"),
    ("--no-cpu-fallback", "no_cpu_fallback"),
    ("--huge-pages", "huge_pages"),
];

/// `msg` with each flag of `table` replaced by its field. A flag is a whole word: `--name` not
/// followed by more of a flag's characters (`--perplexity-kld` is not the start of
/// `--perplexity-kld-top-k`).
pub fn respell(msg: &str, table: &[(&str, &str)]) -> String {
    let flag_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(i) = rest.find("--") {
        out.push_str(&rest[..i]);
        let word = &rest[i..];
        let len = 2 + word[2..].find(|c: char| !flag_char(c)).unwrap_or(word.len() - 2);
        match table.iter().find(|(flag, _)| *flag == &word[..len]) {
            Some((_, field)) => out.push_str(field),
            None => out.push_str(&word[..len]),
        }
        rest = &word[len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_flags_only() {
        let t = &[("--perplexity-kld", "kld_base"), ("--kv-len", "kv_len")];
        assert_eq!(respell("--perplexity-kld x and --perplexity-kld-top-k 3", t), "kld_base x and --perplexity-kld-top-k 3");
        assert_eq!(respell("(--kv-len), --kv-len.", t), "(kv_len), kv_len.");
        assert_eq!(respell("a -- b --", t), "a -- b --");
        assert_eq!(respell("no flags: ünïcode", t), "no flags: ünïcode");
    }
}
