//! `--perplexity-merge SHARD...`: checks that the shard files are one plan, complete and disjoint,
//! then reduces their window records with the single run's own code ([`crate::summary::finish`]):
//! the report's numbers equal the single run's bit for bit, the merged KL base its base byte for byte.

use crate::error::{EvalError, Result};
use crate::kld::{BaseRecords, LseBaseWriter};
use crate::request::{MergeRequest, ShardSpec};
use crate::shard_file::{ShardFile, LSE_VERSION};
use crate::summary::{finish, Outcome};
use serde_json::Value;
use std::path::PathBuf;

fn refuse(m: String) -> EvalError {
    EvalError::InvalidOption(m)
}

fn show(v: Option<&Value>) -> String {
    let s = v.map_or("(none)".to_string(), Value::to_string);
    if s.len() > 80 {
        format!("{}…", &s[..s.char_indices().nth(77).map_or(s.len(), |c| c.0)])
    } else {
        s
    }
}

/// Reads the shards and checks them: one plan (every fingerprint field equal), written by this LSE
/// version, each index once, none missing, each holding exactly its share of the windows.
/// Returns them in index order.
pub fn read_shards(paths: &[PathBuf]) -> Result<Vec<(PathBuf, ShardFile)>> {
    let mut read: Vec<(PathBuf, Value, ShardFile)> = Vec::with_capacity(paths.len());
    for p in paths {
        let (h, s) = ShardFile::read(p)?;
        read.push((p.clone(), h, s));
    }
    let (p0, h0, _) = &read[0];
    for (p, h, _) in &read {
        if h.get("lse_version").and_then(Value::as_str) != Some(LSE_VERSION) {
            return Err(refuse(format!(
                "shard file {} was written by LSE {} but this is LSE {LSE_VERSION}: rerun the shards with this version",
                p.display(),
                show(h.get("lse_version"))
            )));
        }
        for &f in ShardFile::PLAN_FIELDS {
            if h.get(f) != h0.get(f) {
                return Err(refuse(format!(
                    "shard files {} and {} are not of one plan: {f} is {} in the first but {} in the second",
                    p0.display(),
                    p.display(),
                    show(h0.get(f)),
                    show(h.get(f))
                )));
            }
        }
    }
    let count = read[0].2.count;
    let windows = read[0].2.meta.run.windows;
    // by index, kept sparse: nothing is sized by the count a file claims
    let mut slots: std::collections::BTreeMap<usize, (PathBuf, ShardFile)> = std::collections::BTreeMap::new();
    for (p, _, s) in read {
        let spec = ShardSpec { index: s.index, count };
        spec.check().map_err(|_| refuse(format!("shard file {} has index {} of {count}", p.display(), s.index)))?;
        let (first, end) = spec.range(windows);
        let indices_ok = s.records.iter().enumerate().all(|(i, r)| r.index == first + i);
        if s.first_window != first || s.end_window != end || s.records.len() != end - first || !indices_ok {
            return Err(refuse(format!(
                "shard file {} does not hold windows {first}..{end} of shard {}/{count}",
                p.display(),
                s.index
            )));
        }
        if let Some((q, _)) = slots.get(&s.index) {
            return Err(refuse(format!("shard {}/{count} is given twice: {} and {}", s.index, q.display(), p.display())));
        }
        slots.insert(s.index, (p, s));
    }
    let n_missing = count - slots.len();
    if n_missing > 0 {
        let mut missing: Vec<String> = (0..count).filter(|i| !slots.contains_key(i)).take(8).map(|i| format!("{i}/{count}")).collect();
        if n_missing > missing.len() {
            missing.push(format!("... ({n_missing} in all)"));
        }
        let many = n_missing > 1;
        return Err(refuse(format!(
            "{} {} {} missing: a merge needs all {count} shards of the plan",
            if many { "shards" } else { "shard" },
            missing.join(", "),
            if many { "are" } else { "is" }
        )));
    }
    Ok(slots.into_values().collect())
}

/// Merges the shards of `req` into the report; writes the merged KL base when the shards recorded one.
pub fn merge(req: &MergeRequest) -> Result<Value> {
    req.validate()?;
    let shards = read_shards(&req.shards)?;
    let first = &shards[0].1;
    let meta = first.meta.clone();
    let base_path: Option<PathBuf> = match (&req.kld_base_out, &first.kld_base_out) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(p)) => Some(PathBuf::from(p)),
        (None, None) => None,
    };
    if base_path.is_some() && meta.base_top_k == 0 {
        return Err(refuse(
            "--perplexity-kld-base-out: the shards recorded no KL base (run them with --perplexity-kld-base-out)".into(),
        ));
    }
    check_not_a_shard(&base_path, &req.shards)?;
    let base_out = match &base_path {
        Some(p) => Some(LseBaseWriter::create(p)?),
        None => None,
    };
    let mut records = Vec::with_capacity(meta.run.windows);
    let mut base = (meta.base_top_k > 0).then(|| BaseRecords::new(meta.base_top_k));
    let mut elapsed = 0.0;
    let mut prefill = 0usize;
    for (_, s) in &shards {
        records.extend(s.records.iter().cloned());
        if let (Some(b), Some(sb)) = (base.as_mut(), &s.base) {
            b.extend(sb);
        }
        elapsed += s.elapsed_seconds;
        prefill += s.prefill_tokens;
    }
    let token_ids = &first.token_ids;
    if crate::input::token_ids_sha256(token_ids) != meta.run.token_ids_sha256 {
        return Err(refuse(format!("shard file {}: its token ids do not match its token_ids_sha256", shards[0].0.display())));
    }
    let outcome = Outcome { token_ids, records: &records, base_records: base.as_ref(), elapsed_seconds: elapsed, prefill_tokens: prefill };
    let windows = req.include_windows || first.include_windows;
    let ids = req.include_token_ids || first.include_token_ids;
    finish(&meta, &outcome, windows, ids, base_out)
}

fn check_not_a_shard(out: &Option<PathBuf>, shards: &[PathBuf]) -> Result<()> {
    if let Some(o) = out {
        if shards.iter().any(|s| crate::atomic::same_file(s, o)) {
            return Err(refuse(format!("--perplexity-kld-base-out {} is one of the shard files", o.display())));
        }
    }
    Ok(())
}
