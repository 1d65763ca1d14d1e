//! Special tokens found by their text, as llama.cpp finds them when the file does not name them:
//! end-of-turn, end-of-message and fill-in-the-middle tokens, the end-of-generation set, the
//! attribute corrections that go with them, and the per-model strip attributes.

use lse_gguf::GgufFile;

use super::{attr, Vocab};

const EOT: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];

const EOM: &[&str] = &["<|eom_id|>"];

const FIM: [&[&str]; 6] = [
    &[
        "<|fim_prefix|>",
        "<fim-prefix>",
        "<fim_prefix>",
        "<｜fim▁begin｜>",
        "<PRE>",
        "▁<PRE>",
        "<|code_prefix|>",
        "<|prefix|>",
    ],
    &[
        "<|fim_suffix|>",
        "<fim-suffix>",
        "<fim_suffix>",
        "<｜fim▁hole｜>",
        "<SUF>",
        "▁<SUF>",
        "<|code_suffix|>",
        "<|suffix|>",
    ],
    &[
        "<|fim_middle|>",
        "<fim-middle>",
        "<fim_middle>",
        "<｜fim▁end｜>",
        "<MID>",
        "▁<MID>",
        "<|code_middle|>",
        "<|middle|>",
    ],
    &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    &[
        "<|fim_repo|>",
        "<|repo_name|>",
        "<fim-repo>",
        "<REPO>",
        "<reponame>",
    ],
    &["<|file_sep|>"],
];

/// Texts that end generation wherever they appear in a vocabulary.
const EOG: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Always rendered as text, whatever the file says (gpt-oss).
const ALWAYS_USER_DEFINED: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

impl Vocab {
    fn set_control(&mut self, id: u32) {
        self.attrs[id as usize] |= attr::CONTROL;
    }

    /// The token among `names` that llama.cpp would pick. It walks its hash map of token texts and
    /// keeps the first match; tokens added last (special tokens at the end of the vocabulary)
    /// come first in that walk, so with several candidates present this takes the highest id
    /// (Llama 3: `<|eot_id|>` over `<|end_of_text|>`; Qwen2: `<|im_end|>` over `<|endoftext|>`).
    fn first_of(&self, names: &[&str]) -> Option<u32> {
        names.iter().filter_map(|t| self.id_of(t)).max()
    }

    /// Fills in EOT, EOM and FIM ids the file left out, marks the tokens found as CONTROL, marks
    /// CONTROL tokens named "unused" as UNUSED, and builds the end-of-generation set.
    pub(super) fn find_specials(&mut self) {
        if self.eot.is_none() {
            self.eot = self.first_of(EOT);
            if let Some(id) = self.eot {
                self.set_control(id);
            }
        }
        if self.eom.is_none() {
            self.eom = self.first_of(EOM);
            if let Some(id) = self.eom {
                self.set_control(id);
            }
        }
        for (k, names) in FIM.iter().enumerate() {
            if self.fim[k].is_none() {
                self.fim[k] = self.first_of(names);
                if let Some(id) = self.fim[k] {
                    self.set_control(id);
                }
            }
        }
        for i in 0..self.attrs.len() {
            let a = self.attrs[i];
            if a & attr::CONTROL != 0 && self.texts[i].contains("unused") {
                self.attrs[i] = a | attr::UNUSED;
            }
        }

        let mut eog: Vec<u32> = self.fim[3..].iter().flatten().copied().collect();
        for t in EOG {
            if let Some(id) = self.id_of(t) {
                eog.push(id);
                self.set_control(id);
            }
        }
        for t in ALWAYS_USER_DEFINED {
            if let Some(id) = self.id_of(t) {
                self.attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        eog.extend(self.eos);
        eog.extend(self.eot);
        eog.extend(self.eom);
        eog.sort_unstable();
        eog.dedup();

        let in_eog = |v: &Vocab, eog: &[u32], t: &str| v.id_of(t).filter(|id| eog.contains(id));
        // gpt-oss and solar-open: "<|end|>" ends a message, not the generation
        let has_return = in_eog(self, &eog, "<|return|>").is_some();
        let has_call = in_eog(self, &eog, "<|call|>").is_some() || in_eog(self, &eog, "<|calls|>").is_some();
        let has_flush = in_eog(self, &eog, "<|flush|>").is_some();
        if let Some(end) = in_eog(self, &eog, "<|end|>") {
            if has_call && (has_return || has_flush) {
                eog.retain(|&x| x != end);
                self.attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // gemma4 and plamo: "</s>" is an ordinary token
        let marker = in_eog(self, &eog, "<|tool_response>").or_else(|| in_eog(self, &eog, "<|plamo:eos|>"));
        if let (Some(_), Some(s)) = (marker, in_eog(self, &eog, "</s>")) {
            eog.retain(|&x| x != s);
            self.attrs[s as usize] = attr::NORMAL;
        }
        self.eog = eog;
    }

    /// The strip attributes llama.cpp gives some models' special tokens, chosen by the model's
    /// pre-type, architecture or name.
    pub(super) fn set_strip_attributes(&mut self, f: &GgufFile) {
        let get = |k: &str| f.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let pre = get("tokenizer.ggml.pre");
        let arch = get("general.architecture");
        let name = get("general.name").to_ascii_lowercase();
        let any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
        let set = |v: &mut Vocab, text: &str, bit: u32, on: bool| {
            if let Some(id) = v.id_of(text) {
                let a = &mut v.attrs[id as usize];
                *a = if on { *a | bit } else { *a & !bit };
            }
        };
        if any(&pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
            || any(&arch, &["nomic-bert-moe", "jina-bert-v3"])
        {
            set(self, "<mask>", attr::LSTRIP, true);
        } else if any(&name, &["phi-3", "phi3"]) {
            for i in 0..self.special_by_length.len() {
                let id = self.special_by_length[i];
                self.attrs[id as usize] |= attr::RSTRIP;
            }
            set(self, "</s>", attr::RSTRIP, true);
            for t in ["<unk>", "<s>", "<|endoftext|>"] {
                set(self, t, attr::RSTRIP, false);
            }
        } else if any(&name, &["modern-bert"]) {
            set(self, "[MASK]", attr::LSTRIP, true);
        }
    }
}
