//! What a generation's text must stay, when a request constrains it: the start of one JSON object
//! (JSON mode, the schema [`Schema::any_object`]) or of a value of a JSON schema. The step asks it
//! whether a token's bytes may follow, feeds it the chosen token's bytes and ends the generation
//! when the value is complete.

use super::json_schema::{Schema, SchemaState};
use super::request::GenerateRequest;
use lse_tokenizer::{Tokenizer, NOT_STRING_SAFE};

/// The schema, the text's state, and scratch for trying tokens.
pub(super) struct Constraint {
    schema: Schema,
    state: SchemaState,
    scratch: SchemaState,
}

impl Constraint {
    /// The request's constraint, if any (its schema compiled; `validate` has checked it).
    pub(super) fn of(req: &GenerateRequest) -> Result<Option<Constraint>, String> {
        let schema = match &req.json_schema {
            Some(s) => Schema::compile(s)?,
            None if req.json_object => Schema::any_object(),
            None => return Ok(None),
        };
        Ok(Some(Constraint { schema, state: SchemaState::default(), scratch: SchemaState::default() }))
    }

    /// Whether token `id` may come next: it renders as some bytes and they keep the constraint.
    pub(super) fn fits(&mut self, tk: &Tokenizer, id: u32) -> bool {
        let piece = tk.piece(id, false);
        !piece.is_empty() && self.accepts(piece)
    }

    /// Sets the logit of every token that may not come next to −∞; returns how many may. A
    /// first byte the constraint refuses refuses every token starting with it (the machine
    /// fails at the first byte it cannot take), so only the tokens of accepted first bytes are
    /// tried whole; inside a string, the tokens with no quote, backslash or control byte are
    /// taken without trying (most of a vocabulary) when their characters fit its room.
    pub(super) fn mask(&mut self, tk: &Tokenizer, logits: &mut [f32]) -> usize {
        let mut keep = vec![false; logits.len()];
        let open = self.state.open_string_room(&self.schema).map(|room| (room, tk.json_string_chars()));
        for (b, ids) in tk.ids_by_first_byte().iter().enumerate() {
            if ids.is_empty() || !self.accepts(&[b as u8]) {
                continue;
            }
            for &id in ids {
                if let Some(k) = keep.get_mut(id as usize) {
                    *k = open.is_some_and(|(room, chars)| chars[id as usize] != NOT_STRING_SAFE && chars[id as usize] as usize <= room)
                        || self.accepts(tk.piece(id, false));
                }
            }
        }
        let mut allowed = 0;
        for (l, k) in logits.iter_mut().zip(keep) {
            if k {
                allowed += 1;
            } else {
                *l = f32::NEG_INFINITY;
            }
        }
        allowed
    }

    /// Whether the text followed by `bytes` still satisfies it.
    fn accepts(&mut self, bytes: &[u8]) -> bool {
        self.state.accepts(&self.schema, bytes, &mut self.scratch)
    }

    /// Feeds the chosen token's bytes; false if they break it.
    pub(super) fn push_all(&mut self, bytes: &[u8]) -> bool {
        self.state.push_all(&self.schema, bytes)
    }

    /// Whether the value is closed.
    pub(super) fn is_complete(&self) -> bool {
        self.state.is_complete()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-byte mask equals trying every token whole, on a byte-level BPE (qwen2) and a
    /// SentencePiece (llama-spm, byte tokens) vocabulary, along instances of a schema and a JSON
    /// object.
    #[test]
    fn the_mask_equals_trying_every_token() {
        for vocab in ["ggml-vocab-qwen2.gguf", "ggml-vocab-llama-spm.gguf"] {
            let f = lse_gguf::GgufFile::open(&lse_testdata::shared(&format!("data/vocab/{vocab}"))).unwrap();
            let tk = Tokenizer::from_gguf(&f).unwrap();
            let schema = serde_json::json!({"type": "object", "properties": {
                "name": {"type": "string", "maxLength": 4}, "n": {"type": "number"}, "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"enum": ["a", "bc"]}, "maxItems": 2}, "note": {"type": "string"},
                "day": {"type": "string", "format": "date"}}});
            let instance = r#"{"name": "Tom\u00e9", "n": -1.5e3, "ok": true, "tags": ["bc", "a"], "note": "a \"b\" c\\d é", "day": "2024-02-29"}"#;
            let of = |schema| Constraint { schema, state: SchemaState::default(), scratch: SchemaState::default() };
            for mut c in [of(Schema::any_object()), of(Schema::compile(&schema).unwrap())] {
                for (i, &b) in instance.as_bytes().iter().enumerate() {
                    if i % 3 == 0 {
                        let n = tk.n_vocab();
                        let mut logits = vec![0f32; n];
                        let allowed = c.mask(&tk, &mut logits);
                        let slow: Vec<bool> = (0..n as u32).map(|id| c.fits(&tk, id)).collect();
                        assert_eq!(logits.iter().map(|l| l.is_finite()).collect::<Vec<_>>(), slow, "{vocab} after {:?}", &instance[..i]);
                        assert_eq!(allowed, slow.iter().filter(|&&k| k).count());
                        assert!(allowed > 0);
                    }
                    assert!(c.push_all(&[b]), "{vocab}: byte {i} of the instance refused");
                }
                assert!(c.is_complete());
            }
        }
    }
}
