//! llama-server's `GET /slots`: one entry per `--parallel` sequence slot, what it runs now or ran
//! last (the task's id, prompt counts, settings, decode progress). As there, a task's prompt and
//! generated text are shown only when `LLAMA_SERVER_SLOTS_DEBUG` is set to a non-zero number:
//! otherwise anyone who may read `/slots` would read every client's text. The scheduler thread
//! copies the counts between steps; the route writes the JSON (and decodes the prompt) on its own
//! thread.

use lse_engine::{Engine, GenerateRequest, Sequence};
use serde_json::{json, Value};
use std::sync::Arc;

/// Whether `/slots` shows the texts: llama-server's `LLAMA_SERVER_SLOTS_DEBUG`, a non-zero number.
pub fn texts_shown() -> bool {
    std::env::var("LLAMA_SERVER_SLOTS_DEBUG").ok().and_then(|v| v.trim().parse::<i64>().ok()).is_some_and(|v| v != 0)
}

/// What a task was asked, fixed when it starts (shared by its running and ended entries).
pub struct TaskInfo {
    id_task: u64,
    /// The request's settings as llama-server writes them (`native::settings`).
    params: Value,
    /// Tokens it may generate (the request's limit, resolved against the context).
    max_tokens: i64,
}

/// What a slot's task is or was: enough to write its entry.
#[derive(Clone)]
pub struct SlotTask {
    info: Arc<TaskInfo>,
    n_prompt: usize,
    /// Prompt tokens run so far, and those found in a kept session instead.
    processed: usize,
    cached: usize,
    decoded: usize,
    has_new_line: bool,
    running: bool,
    /// The prompt's ids and the text its client got (stop string cut), when [`texts_shown`].
    texts: Option<(Vec<u32>, String)>,
}

impl SlotTask {
    /// The task `info` started as `seq` (`running`: still stepping) as it stands.
    pub fn of(info: &Arc<TaskInfo>, seq: &Sequence, running: bool, texts: bool) -> SlotTask {
        let fed = seq.prompt().len() - seq.prompt_left();
        let generated = seq.text.text();
        SlotTask {
            info: info.clone(),
            n_prompt: seq.prompt().len(),
            processed: fed.saturating_sub(seq.cached_tokens()),
            cached: seq.cached_tokens(),
            decoded: seq.steps.len(),
            has_new_line: generated.contains('\n'),
            running,
            texts: texts.then(|| (seq.prompt().to_vec(), generated.to_string())),
        }
    }
}

/// One slot as the scheduler sees it: busy or not, and its task now or last.
pub struct SlotView {
    pub processing: bool,
    pub task: Option<SlotTask>,
}

/// Each slot's last task, and the next task id.
pub struct Slots {
    last: Vec<Option<SlotTask>>,
    next_task: u64,
    /// Whether tasks keep their texts ([`texts_shown`]).
    pub texts: bool,
}

impl Slots {
    pub fn new(parallel: usize, texts: bool) -> Slots {
        Slots { last: (0..parallel).map(|_| None).collect(), next_task: 0, texts }
    }

    /// A new task's id.
    pub fn task_id(&mut self) -> u64 {
        self.next_task += 1;
        self.next_task - 1
    }

    /// A task starting with `req`: its id and settings; its stop strings only when texts are
    /// shown (they are the client's text, which llama-server's metrics-only settings leave out).
    pub fn start(&mut self, req: &GenerateRequest) -> Arc<TaskInfo> {
        let mut params = super::native::settings(req);
        if !self.texts {
            params.as_object_mut().map(|o| o.remove("stop"));
        }
        Arc::new(TaskInfo { id_task: self.task_id(), params, max_tokens: req.max_tokens })
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

    /// Every slot: the running tasks from `now` (slot, task), the others' last.
    pub fn views(&self, mut now: Vec<(usize, SlotTask)>) -> Vec<SlotView> {
        (0..self.last.len())
            .map(|id| match now.iter().position(|(s, _)| *s == id) {
                Some(i) => SlotView { processing: true, task: Some(now.swap_remove(i).1) },
                None => SlotView { processing: false, task: self.last[id].clone() },
            })
            .collect()
    }
}

/// The `/slots` answer: llama-server's fields per slot.
pub fn json(engine: &Engine, views: &[SlotView]) -> Value {
    let entries = views.iter().enumerate().map(|(id, v)| {
        let mut e = json!({"id": id, "n_ctx": engine.kv_capacity(), "speculative": false, "is_processing": v.processing});
        if let Some(t) = &v.task {
            let o = e.as_object_mut().expect("an object");
            o.insert("id_task".into(), json!(t.info.id_task));
            o.insert("n_prompt_tokens".into(), json!(t.n_prompt));
            o.insert("n_prompt_tokens_processed".into(), json!(t.processed));
            o.insert("n_prompt_tokens_cache".into(), json!(t.cached));
            o.insert("params".into(), t.info.params.clone());
            let next = json!({
                "has_next_token": t.running,
                "has_new_line": t.has_new_line,
                "n_remain": (t.info.max_tokens - t.decoded as i64).max(0),
                "n_decoded": t.decoded,
            });
            o.insert("next_token".into(), json!([next]));
            if let Some((prompt, generated)) = &t.texts {
                // the prompt with its special tokens' text, as llama-server shows it
                o.insert("prompt".into(), json!(String::from_utf8_lossy(&engine.tokenizer().detokenize(prompt, false, true))));
                o.insert("generated".into(), json!(generated));
            }
        }
        e
    });
    Value::Array(entries.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free_slot_and_task_ids() {
        let mut s = Slots::new(3, false);
        assert_eq!(s.free([].into_iter()), 0);
        assert_eq!(s.free([0, 2].into_iter()), 1);
        assert_eq!(s.free([1, 0].into_iter()), 2);
        assert_eq!((s.task_id(), s.task_id()), (0, 1));
    }
}
