//! llama-server's `GET /slots`: one entry per `--parallel` sequence slot, what it runs now or ran
//! last (the task's id, prompt counts, settings, decode progress, prompt and generated text).
//! The scheduler thread fills them in between steps; nothing is kept beyond each slot's last task.

use lse_engine::{Engine, Sequence};
use serde_json::{json, Value};

/// What a slot's task is or was: enough to write its entry.
pub struct SlotTask {
    pub id_task: u64,
    /// The request's settings as llama-server writes them (`native::settings`).
    pub params: Value,
    pub max_tokens: i64,
    prompt: Vec<u32>,
    generated: Vec<u32>,
    /// Prompt tokens run so far, and those found in a kept session instead.
    processed: usize,
    cached: usize,
    running: bool,
}

impl SlotTask {
    /// The task of `seq` (`running`: still stepping) as it stands.
    pub fn of(id_task: u64, params: &Value, max_tokens: i64, seq: &Sequence, running: bool) -> SlotTask {
        let fed = seq.prompt().len() - seq.prompt_left();
        SlotTask {
            id_task,
            params: params.clone(),
            max_tokens,
            prompt: seq.prompt().to_vec(),
            generated: seq.ids(),
            processed: fed.saturating_sub(seq.cached_tokens()),
            cached: seq.cached_tokens(),
            running,
        }
    }
}

/// Slot ids in use and each slot's last task, and the next task id.
pub struct Slots {
    last: Vec<Option<SlotTask>>,
    next_task: u64,
}

impl Slots {
    pub fn new(parallel: usize) -> Slots {
        Slots { last: (0..parallel).map(|_| None).collect(), next_task: 0 }
    }

    /// A new task's id.
    pub fn task_id(&mut self) -> u64 {
        self.next_task += 1;
        self.next_task - 1
    }

    /// The lowest slot id not in `busy`.
    pub fn free(&self, busy: impl Iterator<Item = usize> + Clone) -> usize {
        (0..self.last.len()).find(|i| !busy.clone().any(|b| b == *i)).unwrap_or(0)
    }

    /// Slot `slot`'s task has ended as `task` says.
    pub fn ended(&mut self, slot: usize, task: SlotTask) {
        if let Some(s) = self.last.get_mut(slot) {
            *s = Some(task);
        }
    }

    /// Every slot's entry: the running tasks from `now` (slot, task), the others' last.
    pub fn json(&self, engine: &Engine, now: Vec<(usize, SlotTask)>) -> Value {
        // the prompt with its special tokens' text, the answer as its client got it (without them)
        let text = |ids: &[u32], special: bool| String::from_utf8_lossy(&engine.tokenizer().detokenize(ids, false, special)).into_owned();
        let entries: Vec<Value> = (0..self.last.len())
            .map(|id| {
                let current = now.iter().find(|(s, _)| *s == id).map(|(_, t)| t);
                let task = current.or(self.last[id].as_ref());
                let mut e = json!({"id": id, "n_ctx": engine.kv_capacity(), "speculative": false, "is_processing": current.is_some()});
                if let Some(t) = task {
                    let generated = text(&t.generated, false);
                    let decoded = t.generated.len() as i64;
                    let o = e.as_object_mut().expect("an object");
                    o.insert("id_task".into(), json!(t.id_task));
                    o.insert("n_prompt_tokens".into(), json!(t.prompt.len()));
                    o.insert("n_prompt_tokens_processed".into(), json!(t.processed));
                    o.insert("n_prompt_tokens_cache".into(), json!(t.cached));
                    o.insert("params".into(), t.params.clone());
                    o.insert(
                        "next_token".into(),
                        json!([{
                            "has_next_token": t.running,
                            "has_new_line": generated.contains('\n'),
                            "n_remain": if t.max_tokens < 0 { -1 } else { (t.max_tokens - decoded).max(0) },
                            "n_decoded": decoded,
                        }]),
                    );
                    o.insert("prompt".into(), json!(text(&t.prompt, true)));
                    o.insert("generated".into(), json!(generated));
                }
                e
            })
            .collect();
        Value::Array(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_slot_and_task_ids() {
        let mut s = Slots::new(3);
        assert_eq!(s.free([].into_iter()), 0);
        assert_eq!(s.free([0, 2].into_iter()), 1);
        assert_eq!(s.free([1, 0].into_iter()), 2);
        assert_eq!((s.task_id(), s.task_id()), (0, 1));
    }
}
