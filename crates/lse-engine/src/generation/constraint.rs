//! What a generation's text must stay, when a request constrains it: the start of one JSON object
//! (JSON mode) or of a value of a JSON schema. The step asks it whether a token's bytes may
//! follow, feeds it the chosen token's bytes and ends the generation when the value is complete.

use super::json_object::JsonObject;
use super::json_schema::{Schema, SchemaState};
use super::request::GenerateRequest;
use lse_tokenizer::Tokenizer;

pub(super) enum Constraint {
    Object(JsonObject),
    /// The schema, the text's state, and scratch for trying tokens.
    Schema(Schema, SchemaState, SchemaState),
}

impl Constraint {
    /// The request's constraint, if any (its schema compiled; `validate` has checked it).
    pub(super) fn of(req: &GenerateRequest) -> Result<Option<Constraint>, String> {
        Ok(match &req.json_schema {
            Some(s) => Some(Constraint::Schema(Schema::compile(s)?, SchemaState::default(), SchemaState::default())),
            None if req.json_object => Some(Constraint::Object(JsonObject::default())),
            None => None,
        })
    }

    /// Whether token `id` may come next: it renders as some bytes and they keep the constraint.
    pub(super) fn fits(&mut self, tk: &Tokenizer, id: u32) -> bool {
        let piece = tk.piece(id, false);
        !piece.is_empty() && self.accepts(piece)
    }

    /// Sets the logit of every token that may not come next to −∞; returns how many may.
    pub(super) fn mask(&mut self, tk: &Tokenizer, logits: &mut [f32]) -> usize {
        let mut allowed = 0;
        for (id, l) in logits.iter_mut().enumerate() {
            if self.fits(tk, id as u32) {
                allowed += 1;
            } else {
                *l = f32::NEG_INFINITY;
            }
        }
        allowed
    }

    /// Whether the text followed by `bytes` still satisfies it.
    fn accepts(&mut self, bytes: &[u8]) -> bool {
        match self {
            Constraint::Object(j) => j.accepts(bytes),
            Constraint::Schema(s, st, scratch) => st.accepts(s, bytes, scratch),
        }
    }

    /// Feeds the chosen token's bytes; false if they break it.
    pub(super) fn push_all(&mut self, bytes: &[u8]) -> bool {
        match self {
            Constraint::Object(j) => j.push_all(bytes),
            Constraint::Schema(s, st, _) => st.push_all(s, bytes),
        }
    }

    /// Whether the value is closed.
    pub(super) fn is_complete(&self) -> bool {
        match self {
            Constraint::Object(j) => j.is_complete(),
            Constraint::Schema(_, st, _) => st.is_complete(),
        }
    }
}
