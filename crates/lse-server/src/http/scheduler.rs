//! The one thread that drives the engine: a bounded queue of jobs, at most `--parallel`
//! sequences stepped together through one batched forward per step (prompt slices of at most
//! `PROMPT_BUDGET` rows, mostly to the shortest remaining prompts, ride along with running decodes), text deltas streamed back through
//! channels, a sequence dropped as soon as its client's channel closes. The sessions of ended
//! sequences stay in a [`SessionCache`] (running plus kept sessions stay within `--parallel`), and
//! a new prompt starts in the one sharing the longest prefix with it, or in a fork of a running
//! sequence's session that shares more (the `n` choices of a prompt, one system prompt sent by
//! many clients at once: a prompt waits while such a sequence prefills its prefix). Scoring jobs
//! (perplexity, prompt log-probs, embeddings) run on the same thread, in queue order, once the sequences
//! admitted before them have finished; between a perplexity run's windows (a prompt's 512-token
//! slices) the generations queued after it run on a time balance ([`Share`]), so a long scoring
//! job halves their speed instead of holding them. A panic inside engine work fails
//! the jobs it touched; the thread goes on.

use super::errors::{from_engine, from_eval, ApiError};
use super::metrics::Metrics;
use super::scoring::{prompt_logprobs, PromptLogprob, ScoredPrompts};
use super::session_cache::SessionCache;
use super::slot_files::{SlotFileAction, SlotFileDone};
use super::slots::{SlotTask, SlotView, Slots, TaskInfo};
use lse_engine::generation::StepToken;
use super::generate::End;
use lse_engine::{common_prefix, Engine, GenerateRequest, Sequence};
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

/// Prompt rows per step: a long prompt is prefilled in slices so running decodes keep going.
pub const PROMPT_BUDGET: usize = 256;

/// What a generation sends back, tagged with the index of its prompt in the request.
#[derive(Debug)]
pub enum Event {
    /// New text (safe to show) and the tokens sampled since the last event.
    Delta { index: usize, text: String, steps: Vec<StepToken> },
    /// The end: why, the counts (`cached_tokens`: prompt tokens found in a kept session, not
    /// run again), the stop string, the times.
    Done { index: usize, end: End },
    Error { index: usize, error: ApiError },
}

pub type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

pub enum Job {
    /// `cache_prompt`: start in the kept session sharing the longest prefix with the prompt.
    Generate { index: usize, req: GenerateRequest, cache_prompt: bool, tx: mpsc::UnboundedSender<Event> },
    Perplexity { req: lse_eval::PerplexityRequest, tx: Reply<serde_json::Value> },
    /// The prompt's log-probs, and how many came from a kept prompt.
    PromptLogprobs { ids: Vec<u32>, top_k: usize, cache_prompt: bool, tx: Reply<(Vec<PromptLogprob>, usize)> },
    /// One pooled, normalised vector per input, all inputs in one batched prefill.
    Embed { req: lse_engine::EmbedRequest, tx: Reply<lse_engine::EmbedReport> },
    /// `GET /slots`: answered when the thread next looks at its queue (between steps, or between
    /// a scoring job's windows), ahead of the jobs waiting there.
    Slots { tx: Reply<Vec<SlotView>> },
    /// A slot action (save, restore, erase its cache): done when the thread next looks at its
    /// queue if the slot is free, else once its task ends (as llama-server defers them).
    SlotFile { slot: usize, action: SlotFileAction, tx: Reply<SlotFileDone> },
    /// Wakes the thread to notice shutdown.
    Wake,
}

/// The thread time a running scoring job owes the generations queued after it: each of its
/// windows (or slices) adds the time it took, and the generations step while the balance is
/// positive. A step may overdraw it (a window can be shorter than a step); later windows pay the
/// debt, so each side gets about half the thread whatever their sizes.
struct Share {
    balance: f64,
    since: Instant,
}

impl Share {
    fn new() -> Share {
        Share { balance: 0.0, since: Instant::now() }
    }

    /// After a window: credits its time, and lets the generations spend the balance.
    fn window_done(&mut self, worker: &mut Worker) {
        self.balance += self.since.elapsed().as_secs_f64();
        if self.balance > 0.0 {
            let t = Instant::now();
            let ran = worker.generate_for(std::time::Duration::from_secs_f64(self.balance));
            // nothing to run: nothing is owed (a generation arriving later starts even)
            self.balance = if ran { self.balance - t.elapsed().as_secs_f64() } else { 0.0 };
        }
        self.since = Instant::now();
    }

    /// Between two passes of a scoring job answering `reply`: the share, then whether the job
    /// goes on (its client still waits and the server runs).
    fn between<T>(&mut self, worker: &mut Worker, reply: &Reply<T>) -> bool {
        self.window_done(worker);
        worker.wanted(reply)
    }
}

/// A perplexity run's progress on the scheduler thread: after each window but the last, the
/// generations queued after it get their [`Share`]; once the client is gone (the handler dropped
/// its receiver) or the server stops, the run ends before its next window.
struct Sharing<'a, T> {
    worker: &'a mut Worker,
    reply: &'a Reply<T>,
    share: Share,
}

impl<T> lse_eval::Progress for Sharing<'_, T> {
    fn update(&mut self, info: &lse_eval::ProgressInfo) {
        if info.windows_done < info.windows_total {
            self.share.window_done(self.worker);
        }
    }
    fn cancelled(&self) -> bool {
        !self.worker.wanted(self.reply)
    }
}

/// The HTTP side's handle.
pub struct Scheduler {
    tx: SyncSender<Job>,
    stop: Arc<AtomicBool>,
}

impl Scheduler {
    /// Starts the thread.
    pub fn start(engine: Arc<Engine>, parallel: usize, queue: usize, metrics: Arc<Metrics>) -> (Scheduler, std::thread::JoinHandle<()>) {
        let (tx, rx) = sync_channel(queue.max(1));
        let stop = Arc::new(AtomicBool::new(false));
        let parallel = parallel.max(1);
        let cache = SessionCache::new(parallel);
        let scored = ScoredPrompts::new(parallel);
        let slots = Slots::new(parallel, super::slots::texts_shown());
        let worker = Worker {
            engine,
            parallel,
            metrics,
            stop: stop.clone(),
            rx,
            running: Vec::new(),
            waiting: VecDeque::new(),
            scoring: false,
            cache,
            scored,
            slots,
            held_slot_files: Vec::new(),
        };
        let handle = std::thread::Builder::new().name("lse-scheduler".into()).spawn(move || worker.run()).expect("spawn the scheduler thread");
        (Scheduler { tx, stop }, handle)
    }

    /// Queues a job; 503 when the queue is full.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        if self.stop.load(Relaxed) {
            return Err(ApiError::unavailable("the server is shutting down"));
        }
        self.tx.try_send(job).map_err(|e| match e {
            TrySendError::Full(_) => ApiError::unavailable("the server is busy: the request queue is full, retry later"),
            TrySendError::Disconnected(_) => ApiError::unavailable("the scheduler has stopped"),
        })
    }

    /// Queues the job `make` builds around a reply channel and waits for its answer. The thread
    /// answers every job it takes (at shutdown with a 503); one it drops unanswered is a 503 too.
    pub async fn ask<T>(&self, make: impl FnOnce(Reply<T>) -> Job) -> Result<T, ApiError> {
        let (tx, rx) = oneshot::channel();
        self.submit(make(tx))?;
        rx.await.map_err(|_| ApiError::unavailable("the server is shutting down (the scheduler dropped the request)"))?
    }

    /// Ends every job and stops the thread.
    pub fn shutdown(&self) {
        self.stop.store(true, Relaxed);
        let _ = self.tx.try_send(Job::Wake);
    }
}

/// Prompt tokens a running sequence must share with a new prompt to be forked for it (or
/// waited for): below that, running them again costs about what a fork's copy does.
const FORK_MIN: usize = 32;

/// See [`Worker::fork_source`].
enum Source {
    Kept,
    Fork(usize),
    Wait,
}

struct Running {
    index: usize,
    /// Its `/slots` entry, and what its task was asked.
    slot: usize,
    task: Arc<TaskInfo>,
    seq: Sequence,
    tx: mpsc::UnboundedSender<Event>,
    steps_sent: usize,
    /// When it joined the running batch, and when its first token came.
    started: Instant,
    first_token: Option<Instant>,
}

impl Running {
    /// Its task as `/slots` shows it (`texts`: with the prompt and the text so far).
    fn slot_task(&self, running: bool, texts: bool) -> SlotTask {
        SlotTask::of(&self.task, &self.seq, running, texts)
    }
}

struct Worker {
    engine: Arc<Engine>,
    parallel: usize,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    rx: Receiver<Job>,
    running: Vec<Running>,
    waiting: VecDeque<Job>,
    /// A scoring job is running (further ones wait for it; generations step between its windows).
    scoring: bool,
    cache: SessionCache,
    scored: ScoredPrompts,
    slots: Slots,
    /// Slot actions waiting for their slot's task to end.
    held_slot_files: Vec<Job>,
}

fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned()).unwrap_or_else(|| "panic".into())
}

fn internal_panic(p: Box<dyn std::any::Any + Send>) -> ApiError {
    let msg = panic_message(&*p);
    eprintln!("lse-server: internal error in a request (the server goes on): {msg}");
    ApiError::internal(format!("internal error: {msg}"))
}

impl Worker {
    fn run(mut self) {
        loop {
            if self.running.is_empty() && self.waiting.is_empty() && !self.stop.load(Relaxed) {
                match self.rx.recv() {
                    Ok(j) => self.receive(j),
                    Err(_) => break,
                }
            }
            self.pull();
            if self.stop.load(Relaxed) {
                self.fail_all();
                self.pull();
                self.fail_all();
                break;
            }
            self.admit_and_step();
        }
        self.metrics.busy_sequences.store(0, Relaxed);
    }

    /// Queues the jobs that have arrived.
    fn pull(&mut self) {
        while let Ok(j) = self.rx.try_recv() {
            self.receive(j);
        }
    }

    /// Queues a job, or answers it at once (`/slots`).
    fn receive(&mut self, job: Job) {
        match job {
            Job::Slots { tx } => {
                let now = self.running.iter().map(|r| (r.slot, r.slot_task(true, self.slots.texts))).collect();
                let _ = tx.send(Ok(self.slots.views(now)));
            }
            Job::SlotFile { slot, .. } if self.slot_busy(slot) => self.held_slot_files.push(job),
            Job::SlotFile { slot, action, tx } => {
                let others = self.running.len();
                let r = catch_unwind(AssertUnwindSafe(|| super::slot_files::run(&self.engine, &mut self.cache, slot, others, self.parallel, action)));
                let _ = tx.send(r.unwrap_or_else(|p| Err(internal_panic(p))));
            }
            j => self.waiting.push_back(j),
        }
    }

    /// Whether a running sequence holds `slot`.
    fn slot_busy(&self, slot: usize) -> bool {
        self.running.iter().any(|r| r.slot == slot)
    }

    /// Runs the held slot actions whose slot is free now (those whose client left are dropped).
    fn release_slot_files(&mut self) {
        for job in std::mem::take(&mut self.held_slot_files) {
            if !matches!(&job, Job::SlotFile { tx, .. } if tx.is_closed()) {
                self.receive(job);
            }
        }
    }

    /// Drops the sequences whose clients left, starts what may start, and steps the running
    /// sequences once.
    fn admit_and_step(&mut self) {
        self.retire(|r| r.tx.is_closed());
        self.admit();
        self.metrics.queue_depth.store(self.waiting.len() as u64, Relaxed);
        self.metrics.busy_sequences.store(self.running.len() as u64, Relaxed);
        if !self.running.is_empty() {
            self.step();
            self.metrics.busy_sequences.store(self.running.len() as u64, Relaxed);
        }
    }

    /// Between a scoring job's windows: the generations queued after it start and step until
    /// `share` has passed (at least one step when any is running); whether any ran. The
    /// scoring's results do not change (batch invariance: separate sessions).
    fn generate_for(&mut self, share: std::time::Duration) -> bool {
        let t = Instant::now();
        let mut ran = false;
        loop {
            self.pull();
            if self.stop.load(Relaxed) {
                return ran;
            }
            self.admit_and_step();
            ran |= !self.running.is_empty();
            if self.running.is_empty() || t.elapsed() >= share {
                return ran;
            }
        }
    }

    /// Whether a scoring job answering `reply` should go on: its client still waits and the
    /// server runs.
    fn wanted<T>(&self, reply: &Reply<T>) -> bool {
        !reply.is_closed() && !self.stop.load(Relaxed)
    }

    /// Starts waiting generations while there is room; runs a scoring job at the front of the
    /// queue once nothing is running and no other scoring job is.
    fn admit(&mut self) {
        // once the server stops, nothing more starts (the thread fails what is left)
        while !self.stop.load(Relaxed) {
            let Some(front) = self.waiting.front() else { break };
            match front {
                Job::Wake => {
                    self.waiting.pop_front();
                }
                Job::Generate { tx, .. } if tx.is_closed() => {
                    self.waiting.pop_front();
                }
                Job::Generate { .. } if self.running.len() < self.parallel => {
                    let Some(Job::Generate { index, req, cache_prompt, tx }) = self.waiting.pop_front() else { unreachable!() };
                    // its own guard: a panic here fails this generation, not a scoring job around it
                    let (session, cached_slot) = match catch_unwind(AssertUnwindSafe(|| self.session_for(&req, cache_prompt))) {
                        Ok(Some(found)) => found,
                        Ok(None) => {
                            // a running sequence is feeding this prompt's prefix: fork it once it is in
                            self.waiting.push_front(Job::Generate { index, req, cache_prompt, tx });
                            break;
                        }
                        Err(p) => {
                            let _ = tx.send(Event::Error { index, error: internal_panic(p) });
                            continue;
                        }
                    };
                    match catch_unwind(AssertUnwindSafe(|| self.engine.start_sequence_in(&req, session))) {
                        Ok(Ok(seq)) => {
                            self.metrics.prompt_tokens.fetch_add(seq.prompt().len() as u64, Relaxed);
                            self.metrics.prompt_tokens_cached.fetch_add(seq.cached_tokens() as u64, Relaxed);
                            // the slot whose cache it starts from, as llama-server picks a slot by
                            // its cached prompt; else the lowest free one
                            let slot = cached_slot.filter(|&s| !self.slot_busy(s)).unwrap_or_else(|| self.slots.free(self.running.iter().map(|r| r.slot)));
                            let task = self.slots.start(&req);
                            self.running.push(Running { index, slot, task, seq, tx, steps_sent: 0, started: Instant::now(), first_token: None });
                        }
                        Ok(Err(e)) => {
                            let _ = tx.send(Event::Error { index, error: from_engine(&e) });
                        }
                        Err(p) => {
                            let _ = tx.send(Event::Error { index, error: internal_panic(p) });
                        }
                    }
                }
                Job::Generate { .. } => break,
                _ if self.running.is_empty() && !self.scoring => {
                    let job = self.waiting.pop_front().expect("front exists");
                    self.score(job);
                }
                _ => break,
            }
        }
    }

    /// The session a new generation starts in, and the slot whose cache it was (`None`: wait a
    /// step, see [`Worker::fork_source`]): a kept session when one shares a prefix with its
    /// prompt; past `--parallel` sessions in all, the least recently used one is emptied and
    /// serves (or freed for a fork).
    fn session_for(&mut self, req: &GenerateRequest, cache_prompt: bool) -> Option<(Option<lse_engine::Session>, Option<usize>)> {
        // a prompt that cannot be laid out fails in start_sequence_in, with its message
        let prompt = self.engine.prompt_ids(req).map(|p| p.into_owned()).unwrap_or_default();
        let source = if cache_prompt { self.fork_source(&prompt) } else { Source::Kept };
        let full = self.running.len() + self.cache.len() >= self.parallel;
        Some(match source {
            Source::Wait => return None,
            Source::Fork(i) => {
                if full {
                    self.cache.take_oldest();
                }
                (Some(self.running[i].seq.session.fork()), None)
            }
            Source::Kept => match self.cache.take(&prompt, cache_prompt, full) {
                Some(k) => (Some(k.session), k.slot),
                None => (None, None),
            },
        })
    }

    /// Where a prompt's prefix is found: in a kept session; in a running sequence's session (a
    /// fork of it); or in the prompt of a running sequence that has not fed it yet (wait a step).
    /// A running source must offer at least [`FORK_MIN`] tokens, and more than the kept sessions.
    fn fork_source(&self, prompt: &[u32]) -> Source {
        let floor = self.cache.best_for(prompt).max(FORK_MIN - 1);
        let (mut fork, mut wait) = ((0, 0), 0);
        for (i, r) in self.running.iter().enumerate() {
            let now = r.seq.session.reusable_prefix(prompt);
            fork = fork.max((now, i));
            if r.seq.prompt_left() > 0 {
                wait = wait.max(common_prefix(r.seq.prompt(), prompt).min(prompt.len().saturating_sub(1)));
            }
        }
        if wait > floor.max(fork.0) {
            Source::Wait
        } else if fork.0 > floor {
            Source::Fork(fork.1)
        } else {
            Source::Kept
        }
    }

    /// Runs a scoring job; no other starts meanwhile.
    fn score(&mut self, job: Job) {
        self.scoring = true;
        self.run_scoring(job);
        self.scoring = false;
    }

    fn run_scoring(&mut self, job: Job) {
        self.metrics.scoring_requests.fetch_add(1, Relaxed);
        let engine = self.engine.clone();
        let engine = &*engine;
        match job {
            Job::Perplexity { req, tx } => {
                if tx.is_closed() {
                    return;
                }
                let mut sharing = Sharing { worker: self, reply: &tx, share: Share::new() };
                let r = catch_unwind(AssertUnwindSafe(|| lse_eval::run_with(engine, &req, &mut sharing)));
                let _ = tx.send(match r {
                    Ok(Ok(v)) => Ok(v),
                    Ok(Err(e)) => Err(from_eval(&e)),
                    Err(p) => Err(internal_panic(p)),
                });
            }
            Job::PromptLogprobs { ids, top_k, cache_prompt, tx } => {
                if tx.is_closed() {
                    return;
                }
                self.metrics.prompt_tokens.fetch_add(ids.len() as u64, Relaxed);
                let mut scored = std::mem::replace(&mut self.scored, ScoredPrompts::new(0));
                let mut share = Share::new();
                let mut between = || share.between(self, &tx);
                let r = catch_unwind(AssertUnwindSafe(|| prompt_logprobs(engine, &ids, top_k, cache_prompt, &mut scored, &mut between)));
                self.scored = scored;
                if let Ok(Ok((_, cached))) = &r {
                    self.metrics.prompt_tokens_cached.fetch_add(*cached as u64, Relaxed);
                }
                let _ = tx.send(r.unwrap_or_else(|p| Err(internal_panic(p))));
            }
            Job::Embed { req, tx } => {
                if tx.is_closed() {
                    return;
                }
                let mut share = Share::new();
                let mut between = || share.between(self, &tx);
                let r = catch_unwind(AssertUnwindSafe(|| engine.embed_request_between(&req, &mut between)));
                if let Ok(Ok(report)) = &r {
                    self.metrics.prompt_tokens.fetch_add(report.prompt_tokens as u64, Relaxed);
                }
                let _ = tx.send(match r {
                    Ok(r) => r.map_err(|e| from_engine(&e)),
                    Err(p) => Err(internal_panic(p)),
                });
            }
            Job::Generate { .. } | Job::Slots { .. } | Job::SlotFile { .. } | Job::Wake => {}
        }
    }

    /// One batched forward over every running sequence, then their news.
    fn step(&mut self) {
        let t = Instant::now();
        let engine = &self.engine;
        let running = &mut self.running;
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut refs: Vec<&mut Sequence> = running.iter_mut().map(|r| &mut r.seq).collect();
            engine.step(&mut refs, PROMPT_BUDGET)
        }));
        match r {
            Ok(Ok(stats)) => {
                self.metrics.step(self.running.len(), stats.rows, stats.prompt_rows, stats.decode_rows, t.elapsed().as_nanos() as u64);
            }
            Ok(Err(e)) => return self.fail_running(from_engine(&e)),
            Err(p) => return self.fail_running(internal_panic(p)),
        }
        let metrics = &self.metrics;
        let now = Instant::now();
        for r in &mut self.running {
            if !r.seq.steps.is_empty() {
                r.first_token.get_or_insert(now);
            }
            let new_steps = r.seq.steps.len() - r.steps_sent;
            metrics.generated_tokens.fetch_add(new_steps as u64, Relaxed);
            metrics.longest_sequence.fetch_max(r.seq.session.len() as u64, Relaxed);
            let steps = r.seq.steps[r.steps_sent..].to_vec();
            r.steps_sent = r.seq.steps.len();
            let done = r.seq.finish;
            let text = if done.is_some() { r.seq.text.finish() } else { r.seq.text.take_delta() };
            if !text.is_empty() || !steps.is_empty() {
                let _ = r.tx.send(Event::Delta { index: r.index, text, steps });
            }
            if let Some(finish) = done {
                let first = r.first_token.unwrap_or(now);
                let end = End {
                    finish: Some(finish),
                    prompt_tokens: r.seq.prompt().len(),
                    cached_tokens: r.seq.cached_tokens(),
                    completion_tokens: r.seq.steps.len(),
                    stop_word: r.seq.text.stop_word().map(str::to_string),
                    prompt_seconds: (first - r.started).as_secs_f64(),
                    predicted_seconds: (now - first).as_secs_f64(),
                };
                metrics.finished(end.completion_tokens, end.predicted_seconds);
                let _ = r.tx.send(Event::Done { index: r.index, end });
            }
        }
        self.retire(|r| r.seq.is_done() || r.tx.is_closed());
    }

    /// Ends the running sequences for which `gone` holds; their sessions are kept for later
    /// prompts (between steps a session's KV rows are whole).
    fn retire(&mut self, gone: impl Fn(&Running) -> bool) {
        for r in self.running.extract_if(.., |r| gone(r)) {
            self.slots.ended(r.slot, r.slot_task(false, self.slots.texts));
            self.cache.put_for(r.slot, r.seq.into_session());
        }
        self.release_slot_files();
    }

    fn fail_running(&mut self, error: ApiError) {
        self.metrics.requests_failed.fetch_add(self.running.len() as u64, Relaxed);
        for r in self.running.drain(..) {
            self.slots.ended(r.slot, r.slot_task(false, self.slots.texts));
            self.cache.forget_slot(r.slot);
            let _ = r.tx.send(Event::Error { index: r.index, error: error.clone() });
        }
        if !self.stop.load(Relaxed) {
            self.release_slot_files();
        }
    }

    fn fail_all(&mut self) {
        self.fail_running(ApiError::unavailable("the server is shutting down"));
        let held = std::mem::take(&mut self.held_slot_files);
        for j in self.waiting.drain(..).chain(held) {
            match j {
                Job::Generate { index, tx, .. } => {
                    let _ = tx.send(Event::Error { index, error: ApiError::unavailable("the server is shutting down") });
                }
                Job::Perplexity { tx, .. } => {
                    let _ = tx.send(Err(ApiError::unavailable("the server is shutting down")));
                }
                Job::PromptLogprobs { tx, .. } => {
                    let _ = tx.send(Err(ApiError::unavailable("the server is shutting down")));
                }
                Job::Embed { tx, .. } => {
                    let _ = tx.send(Err(ApiError::unavailable("the server is shutting down")));
                }
                Job::SlotFile { tx, .. } => {
                    let _ = tx.send(Err(ApiError::unavailable("the server is shutting down")));
                }
                // answered by `receive`, never queued
                Job::Slots { .. } | Job::Wake => {}
            }
        }
    }
}
