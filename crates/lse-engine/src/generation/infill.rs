//! Fill-in-the-middle prompts: the text before and after a gap, laid out with the vocabulary's FIM
//! tokens so the model writes the gap. Two layouts: the single-file one code models are trained
//! on (`[PRE]prefix[SUF]suffix[MID]`, what OpenAI's `suffix` asks for), and llama-server's
//! `/infill` one, which puts other files (and a repository name) before it and cuts long
//! prefixes and suffixes to fit one batch, token for token as that server does.

use crate::{Engine, EngineError};
use serde::{Deserialize, Serialize};

/// A fill-in-the-middle request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Infill {
    /// Text before the gap (special-token text is plain text).
    pub prefix: String,
    /// Text after the gap (special-token text is plain text).
    pub suffix: String,
    /// Text the middle starts with (llama-server's `prompt`; special-token text parsed); it
    /// follows the prefix.
    #[serde(default)]
    pub middle: String,
    /// Other files as context (llama-server's `input_extra`). Given, even empty, the prompt takes
    /// llama-server's `/infill` layout; absent, the single-file one.
    #[serde(default)]
    pub files: Option<Vec<InfillFile>>,
}

/// A file given as context to a fill-in-the-middle request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InfillFile {
    #[serde(default = "default_filename")]
    pub filename: String,
    pub text: String,
}

fn default_filename() -> String {
    "tmp".into()
}

/// The placeholders llama-server names the repository and the file being written with.
const REPO_NAME: &str = "myproject\n";
const FILE_NAME: &str = "filename\n";
/// Between context files when the vocabulary has no file separator.
const SNIPPET_SEPARATOR: &str = "\n\n--- snippet ---\n\n";

impl Engine {
    /// The token ids of a fill-in-the-middle prompt; an error when the vocabulary lacks a
    /// prefix, suffix or middle token.
    pub fn infill_ids(&self, f: &Infill) -> Result<Vec<u32>, EngineError> {
        let tk = self.tokenizer();
        let fim = tk.fim();
        let (Some(pre), Some(suf), Some(mid)) = (fim.pre, fim.suf, fim.mid) else {
            let missing: Vec<&str> = [(fim.pre, "prefix"), (fim.suf, "suffix"), (fim.mid, "middle")].iter().filter(|t| t.0.is_none()).map(|t| t.1).collect();
            let names = match missing.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => missing.join(""),
            };
            return Err(EngineError::InvalidRequest(format!("this model cannot fill in the middle: its vocabulary has no FIM {names} token")));
        };
        let plain = |s: &str| tk.tokenize(s, false, false);
        let mut prefix = plain(&f.prefix);
        let mut suffix = plain(&f.suffix);
        let middle = tk.tokenize(&f.middle, false, true);
        let mut extra = Vec::new();
        if let Some(files) = &f.files {
            // llama-server's cuts: a prefix of 3/4 of a batch at most (its end kept), a suffix of
            // the rest less the middle (its start kept), and context up to the room its
            // default n_predict of -1 leaves (the end kept)
            let n_batch = self.options().batch_size as i64;
            let prefix_take = (prefix.len() as i64).min(3 * (n_batch / 4)) as usize;
            let suffix_take = (suffix.len() as i64).min((n_batch / 4 - (2 + middle.len() as i64)).max(0)) as usize;
            prefix.drain(..prefix.len() - prefix_take);
            suffix.truncate(suffix_take);
            if let Some(rep) = fim.rep {
                extra.push(rep);
                extra.extend(plain(REPO_NAME));
            }
            for file in files {
                match fim.sep {
                    Some(sep) => {
                        extra.push(sep);
                        extra.extend(plain(&format!("{}\n", file.filename)));
                    }
                    None => extra.extend(plain(SNIPPET_SEPARATOR)),
                }
                extra.extend(plain(&file.text));
            }
            if let Some(sep) = fim.sep {
                extra.push(sep);
                extra.extend(plain(FILE_NAME));
            }
            let extra_take = ((self.kv_capacity() as i64 - n_batch + 2).max(0) as usize).min(extra.len());
            extra.drain(..extra.len() - extra_take);
        }
        let mut ids = extra;
        if tk.add_bos() {
            ids.extend(tk.bos_id());
        }
        ids.push(pre);
        ids.extend(prefix);
        ids.extend(middle);
        ids.push(suf);
        ids.extend(suffix);
        ids.push(mid);
        Ok(ids)
    }
}
