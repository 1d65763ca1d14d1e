//! One generation in flight: its session, sampler, prompt progress, output and text. The
//! scheduler of the CLI, the C API, Python and the HTTP server all drive these through
//! [`Engine::step`]: each step feeds prompt slices and the last sampled tokens of many
//! sequences through one batched forward, then samples every sequence that produced logits.

use super::constraint::Constraint;
use super::request::{GenerateRequest, Prompt};
use super::sampler::{ban, Sampler};
use super::text::TextStream;
use crate::{check_token_ids, BatchRow, Engine, EngineError, Session, StepList};
use lse_kernels::reduce::{RowReduce, SlicePart, SlicedRow};
use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

thread_local! {
    /// The logits of a step's output rows, reused from step to step (see `head_logits_into`).
    static LOGITS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Why a generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    /// An end-of-generation token.
    Eos,
    /// A stop string.
    Stop,
    /// `max_tokens`, or the session is full.
    Length,
}

impl FinishReason {
    pub fn name(self) -> &'static str {
        match self {
            FinishReason::Eos => "eos",
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// One sampled step: the token, its log-prob under the model (before any sampler change),
/// the gap between the two most likely tokens, and the requested alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct StepToken {
    pub id: u32,
    pub logprob: f64,
    pub top2_margin: f64,
    /// Greedy only: the chosen logit's lead over the next best after the penalties.
    pub choice_margin: f64,
    pub top: Vec<(u32, f64)>,
    /// With `post_sampling_probs`: the probabilities after the sampler chain.
    pub post_sampling: Option<PostSampling>,
}

/// A step's probabilities among the candidates its sampler chain kept (llama-server's
/// `post_sampling_probs`).
#[derive(Clone, Debug, PartialEq)]
pub struct PostSampling {
    /// The chosen token's.
    pub prob: f64,
    /// The most likely kept candidates (at most `top_logprobs`, none of probability 0).
    pub top: Vec<(u32, f64)>,
}

impl PostSampling {
    fn new(id: u32, kept: &[(u32, f64)], n: usize) -> PostSampling {
        let prob = kept.iter().find(|c| c.0 == id).map_or(0.0, |c| c.1);
        PostSampling { prob, top: kept.iter().take(n).take_while(|c| c.1 > 0.0).copied().collect() }
    }
}

pub struct Sequence {
    pub session: Session,
    prompt: Vec<u32>,
    /// Prompt tokens already fed.
    fed: usize,
    /// Prompt tokens found in the session it started in (not run again).
    cached: usize,
    /// Sampled but not fed yet.
    next: Option<u32>,
    sampler: Sampler,
    max_tokens: usize,
    ignore_eos: bool,
    /// The request's `stop_token_ids`, sorted.
    stop_ids: Vec<u32>,
    min_tokens: usize,
    top_logprobs: usize,
    pub steps: Vec<StepToken>,
    pub text: TextStream,
    pub finish: Option<FinishReason>,
    pub started: Instant,
    /// When the first token was sampled (the prompt's end).
    pub first_token_at: Option<Instant>,
    /// The logits row the sampler penalizes and filters, kept between steps.
    work: Vec<f32>,
    /// JSON (schema) mode: what the generated text must stay.
    constraint: Option<Constraint>,
}

impl Sequence {
    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    pub fn is_done(&self) -> bool {
        self.finish.is_some()
    }

    /// Prompt tokens still to feed.
    pub fn prompt_left(&self) -> usize {
        self.prompt.len() - self.fed
    }

    /// Ends the sequence now (e.g. its client went away).
    pub fn cancel(&mut self) {
        self.finish.get_or_insert(FinishReason::Stop);
    }

    /// Prompt tokens whose KV rows came from the session the sequence started in.
    pub fn cached_tokens(&self) -> usize {
        self.cached
    }

    /// The session, to start another sequence in (see [`Engine::start_sequence_in`]).
    pub fn into_session(self) -> Session {
        self.session
    }

    pub fn ids(&self) -> Vec<u32> {
        self.steps.iter().map(|s| s.id).collect()
    }
}

/// What one step did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepStats {
    pub rows: usize,
    pub prompt_rows: usize,
    pub decode_rows: usize,
}

impl Engine {
    /// Tokenizes and checks a request; the sequence owns a fresh session of `--kv-len` tokens.
    pub fn start_sequence(&self, req: &GenerateRequest) -> Result<Sequence, EngineError> {
        self.start_sequence_in(req, None)
    }

    /// The request's prompt as token ids (a text is tokenized with special tokens parsed; ids
    /// are borrowed; a fill-in-the-middle prompt is laid out, an error when the model has no FIM
    /// tokens).
    pub fn prompt_ids<'a>(&self, req: &'a GenerateRequest) -> Result<Cow<'a, [u32]>, EngineError> {
        self.prompt_tokens(&req.prompt, req.add_special)
    }

    /// A prompt as token ids: a text tokenized (special tokens added as the vocabulary asks when
    /// `add_special`, special-token text parsed), ids borrowed, a fill-in-the-middle prompt laid out.
    pub fn prompt_tokens<'a>(&self, prompt: &'a Prompt, add_special: bool) -> Result<Cow<'a, [u32]>, EngineError> {
        Ok(match prompt {
            Prompt::Text(t) => Cow::Owned(self.tokenizer().tokenize(t, add_special, true)),
            Prompt::Tokens(t) => Cow::Borrowed(t),
            Prompt::Infill(f) => Cow::Owned(self.infill_ids(f)?),
        })
    }

    /// A 400 when no token could be sampled at the first step: `logit_bias` bans every token, or
    /// every token but those that end the answer, which `min_tokens` holds back, or every token
    /// the JSON constraint allows first.
    fn refuse_dead_start(&self, req: &GenerateRequest, constraint: Option<&mut Constraint>) -> Result<(), EngineError> {
        let n_banned = req.sampling.logit_bias.values().filter(|&&b| b == f32::NEG_INFINITY).count();
        let ends = || self.tokenizer().eog_ids().iter().filter(|_| !req.ignore_eos).chain(&req.stop_token_ids).copied();
        // fewer bans than tokens that could not end the answer: some are open
        if n_banned == 0 || (constraint.is_none() && n_banned < self.n_vocab().saturating_sub(ends().count())) {
            return Ok(());
        }
        let leaves_any = |row: &[f32]| super::logit_bias::leaves_any(&req.sampling.logit_bias, row);
        let mut row = vec![0f32; self.n_vocab()];
        if !leaves_any(&row) {
            return Err(EngineError::InvalidRequest("logit_bias bans every token of the vocabulary".into()));
        }
        if req.min_tokens > 0 {
            ban(&mut row, &ends().collect::<Vec<u32>>());
            if !leaves_any(&row) {
                return Err(EngineError::InvalidRequest("logit_bias leaves only tokens that end the answer, which min_tokens holds back".into()));
            }
        }
        if let Some(c) = constraint {
            c.mask(self.tokenizer(), &mut row);
            if !leaves_any(&row) {
                return Err(EngineError::InvalidRequest("logit_bias bans every token the JSON constraint allows first".into()));
            }
        }
        Ok(())
    }

    /// As [`Engine::start_sequence`], in `session` when one is given (prefix reuse, llama-server's
    /// `cache_prompt`): the tokens it shares with the prompt ([`Session::reusable_prefix`]) stay
    /// and only the rest of the prompt runs; whatever else it held is dropped. Batch invariance
    /// makes the kept rows exactly those a fresh prefill would compute, so the generation is
    /// bit-identical to one in a new session.
    pub fn start_sequence_in(&self, req: &GenerateRequest, session: Option<Session>) -> Result<Sequence, EngineError> {
        req.validate().map_err(EngineError::InvalidRequest)?;
        let prompt = self.prompt_ids(req)?.into_owned();
        if prompt.is_empty() {
            return Err(EngineError::InvalidRequest("the prompt has no tokens".into()));
        }
        check_token_ids(&prompt, self.n_vocab())?;
        // keyed by id: no position in the request to name
        if let Some(id) = req.sampling.logit_bias.keys().find(|&&t| t as usize >= self.n_vocab()) {
            return Err(EngineError::InvalidRequest(format!("logit bias: token id {id} is outside the vocabulary of {}", self.n_vocab())));
        }
        check_token_ids(&req.stop_token_ids, self.n_vocab()).map_err(|e| EngineError::InvalidRequest(format!("stop: {e}")))?;
        if req.top_logprobs > self.n_vocab() {
            return Err(EngineError::InvalidRequest(format!("top logprobs must be at most the vocabulary's {} tokens, got {}", self.n_vocab(), req.top_logprobs)));
        }
        let mut constraint = Constraint::of(req).map_err(EngineError::InvalidRequest)?;
        if let Some(c) = constraint.as_mut().filter(|_| !req.value_prefix.is_empty()) {
            if !c.push_all(req.value_prefix.as_bytes()) || c.is_complete() {
                return Err(EngineError::InvalidRequest(format!(
                    "the answer's start {:?} is not the start of an unfinished JSON value the response format allows",
                    req.value_prefix
                )));
            }
        }
        self.refuse_dead_start(req, constraint.as_mut())?;
        let (session, fed) = match session {
            Some(mut s) => {
                let keep = s.reusable_prefix(&prompt);
                s.truncate(keep)?;
                (s, keep)
            }
            None => (self.new_session(None)?, 0),
        };
        // a new session holds --kv-len tokens; a given one at most that
        if prompt.len() >= session.capacity() {
            return Err(EngineError::PromptTooLong { tokens: prompt.len(), capacity: session.capacity() });
        }
        // the candidates are kept (a copy of the list each step) only where they are reported
        let post_sampling = req.post_sampling_probs && req.top_logprobs > 0;
        Ok(Sequence {
            session,
            prompt,
            fed,
            cached: fed,
            next: None,
            sampler: if post_sampling { Sampler::new(&req.sampling).keeping_candidates() } else { Sampler::new(&req.sampling) },
            max_tokens: req.max_tokens as usize,
            ignore_eos: req.ignore_eos,
            stop_ids: {
                let mut v = req.stop_token_ids.clone();
                v.sort_unstable();
                v
            },
            min_tokens: req.min_tokens,
            top_logprobs: req.top_logprobs,
            steps: Vec::new(),
            text: TextStream::new(&req.stop),
            finish: None,
            started: Instant::now(),
            first_token_at: None,
            work: Vec::new(),
            constraint,
        })
    }

    /// One forward pass for many sequences: every running sequence's sampled token (decode rows
    /// first), then prompt slices of at most `prompt_budget` rows in all (split as
    /// [`prompt_slices`] says); then samples each sequence whose last prompt token or decode row
    /// came out. Finished sequences are skipped.
    pub fn step(&self, seqs: &mut [&mut Sequence], prompt_budget: usize) -> Result<StepStats, EngineError> {
        let mut rows: StepList<BatchRow> = StepList::new();
        let mut stats = StepStats::default();
        for (i, s) in seqs.iter().enumerate() {
            if let (None, Some(t)) = (s.finish, s.next) {
                rows.push(BatchRow { seq: i, pos: s.session.len(), token: t, output: true });
                stats.decode_rows += 1;
            }
        }
        for (i, take) in prompt_slices(seqs, prompt_budget).into_iter().enumerate() {
            let s = &seqs[i];
            let p0 = s.session.len();
            for j in 0..take {
                let last = s.fed + j + 1 == s.prompt.len();
                rows.push(BatchRow { seq: i, pos: p0 + j, token: s.prompt[s.fed + j], output: last });
            }
            stats.prompt_rows += take;
        }
        stats.rows = rows.len();
        if rows.is_empty() {
            return Ok(stats);
        }
        let hidden = {
            let mut sessions: StepList<&mut Session> = seqs.iter_mut().map(|s| &mut s.session).collect();
            self.forward(&mut sessions, &rows)?
        };
        for r in &rows {
            let s = &mut seqs[r.seq];
            if s.next.take().is_none() {
                s.fed += 1;
            }
        }
        LOGITS.with(|logits| {
            let mut logits = logits.borrow_mut();
            self.head_logits_into(&hidden, &mut logits)?;
            // (sequence, top-k to keep) of each output row; the logits hold their rows in this order
            let outs: StepList<(usize, usize)> = rows.iter().filter(|r| r.output).map(|r| (r.seq, seqs[r.seq].top_logprobs.max(2))).collect();
            self.sample_rows(seqs, &outs, &mut logits)?;
            Ok(stats)
        })
    }

    /// Reduces each output row's logits (`outs`: its sequence and top-k, rows in order in
    /// `logits`) and samples its sequence's next token, on the pool.
    fn sample_rows(&self, seqs: &mut [&mut Sequence], outs: &[(usize, usize)], logits: &mut [f32]) -> Result<(), EngineError> {
        let v = self.n_vocab();
        // one task per row and vocabulary slice, merged in slice order: the same slices and sums
        // as scoring's (`head_reduce`), so a generated token's log-prob is the one scoring gives
        // its logits
        let slices = crate::head::head_slices(v);
        let ns = slices.len();
        let parts: StepList<OnceLock<SlicePart>> = (0..outs.len() * ns).map(|_| OnceLock::new()).collect();
        let d = self.options().dialect;
        let all: &[f32] = logits;
        self.backend.run(parts.len(), &|t| {
            let (j, cols) = (t / ns, &slices[t % ns]);
            let _ = parts[t].set(SlicePart::new(d, &[], outs[j].1, cols.start, &all[j * v..][cols.clone()]));
        });
        // then one task per row samples (in place on its row, which it leaves as it was); a
        // sequence has one output row a step, so each task holds its own
        let mut slots: StepList<Option<&mut Sequence>> = seqs.iter_mut().map(|s| Some(&mut **s)).collect();
        let jobs: StepList<Mutex<(Option<&mut Sequence>, &mut [f32])>> =
            outs.iter().zip(logits.chunks_exact_mut(v)).map(|(o, row)| Mutex::new((slots[o.0].take(), row))).collect();
        let failed = Mutex::new(None);
        self.backend.run(outs.len(), &|j| {
            let mut red = SlicedRow::new(&[], outs[j].1);
            for part in &parts[j * ns..(j + 1) * ns] {
                red.merge(part.get().expect("every slice reduced"));
            }
            let mut job = jobs[j].lock().unwrap_or_else(|e| e.into_inner());
            let (seq, row) = &mut *job;
            let seq = seq.as_deref_mut().expect("one output row per sequence");
            if let Err(e) = self.accept(seq, row, &red.finish()) {
                *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
            }
        });
        failed.into_inner().unwrap_or_else(|e| e.into_inner()).map_or(Ok(()), Err)
    }

    /// Samples the sequence's next token from one logits row (`red`: its reductions) and updates
    /// its text and state.
    fn accept(&self, s: &mut Sequence, row: &mut [f32], red: &RowReduce) -> Result<(), EngineError> {
        if s.first_token_at.is_none() {
            s.first_token_at = Some(Instant::now());
        }
        if s.steps.len() >= s.max_tokens {
            s.finish = Some(FinishReason::Length);
            return Ok(());
        }
        // `red`: the model's distribution, reduced by the same kernels as scoring (f64 sum of exps)
        if !red.max.is_finite() || !red.sum_exp.is_finite() {
            return Err(EngineError::NonFinite("the logits of a generation step are not finite".into()));
        }
        let (max, lse) = (red.max as f64, red.sum_exp.ln());
        let tk = self.tokenizer();
        // before min_tokens, the tokens that would end the generation may not be sampled
        let hold_end = s.steps.len() < s.min_tokens;
        let bans: StepList<u32> = if hold_end {
            let eog = if s.ignore_eos { &[][..] } else { tk.eog_ids() };
            eog.iter().chain(&s.stop_ids).copied().collect()
        } else {
            StepList::new()
        };
        let mut argmax_only = s.sampler.is_plain_greedy() && !hold_end;
        let (mut id, mut choice_margin) = if argmax_only {
            // no penalty: the argmax is already known
            let second = red.top.get(1).map_or(f32::NEG_INFINITY, |t| t.1);
            (red.argmax, (red.max - second) as f64)
        } else {
            s.sampler.sample_in_place(row, s.session.tokens(), &bans)
        };
        if let Some(c) = &mut s.constraint {
            if !c.fits(tk, id) {
                // as llama.cpp's grammar sampling: only when the pick breaks the constraint, mask
                // every token that would and run the chain again
                s.work.clear();
                s.work.extend_from_slice(row);
                ban(&mut s.work, &bans);
                c.mask(tk, &mut s.work);
                if !s.sampler.leaves_any(&s.work) {
                    // no token of the vocabulary continues the value: this sequence ends cut short
                    // (an error would fail every sequence of the step)
                    s.finish = Some(FinishReason::Length);
                    return Ok(());
                }
                (id, choice_margin) = s.sampler.sample_with_margin(&mut s.work, s.session.tokens());
                argmax_only = false;
            }
        }
        let post_sampling = s.sampler.keeps_candidates().then(|| {
            let kept: &[(u32, f64)] = if argmax_only { &[(id, 1.0)] } else { s.sampler.candidates_kept() };
            PostSampling::new(id, kept, s.top_logprobs)
        });
        let lp = |l: f32| l as f64 - max - lse;
        let top = &red.top;
        let margin = if top.len() > 1 { (top[0].1 - top[1].1) as f64 } else { f64::INFINITY };
        s.steps.push(StepToken {
            id,
            logprob: lp(row[id as usize]),
            top2_margin: margin,
            choice_margin,
            top: top.iter().take(s.top_logprobs).map(|&(t, l)| (t, lp(l))).collect(),
            post_sampling,
        });
        let end = (tk.is_eog(id) && !s.ignore_eos) || s.stop_ids.binary_search(&id).is_ok();
        if end {
            s.finish = Some(FinishReason::Eos);
            return Ok(());
        }
        let piece = tk.piece(id, false);
        let closed = s.constraint.as_mut().is_some_and(|c| c.push_all(piece) && c.is_complete());
        if s.text.push(piece) || closed {
            s.finish = Some(FinishReason::Stop);
        } else if s.steps.len() >= s.max_tokens || s.session.len() >= s.session.capacity() {
            s.finish = Some(FinishReason::Length);
        } else {
            s.next = Some(id);
        }
        Ok(())
    }
}

/// How many prompt rows each sequence feeds in a step of `budget` prompt rows. The first
/// unfinished sequence with prompt rows left (the oldest, in the caller's order) is sure of a
/// quarter of the budget, so a long prompt keeps moving while shorter ones keep coming; the rest
/// goes to the prompts with the fewest rows left first (ties in the given order), so a short
/// prompt admitted beside a long one gets its first token in the next step instead of after the
/// long prompt's slices. Which rows share a pass changes no value (batch invariance).
fn prompt_slices(seqs: &[&mut Sequence], mut budget: usize) -> StepList<usize> {
    let left: StepList<usize> = seqs.iter().map(|s| if s.finish.is_none() { s.prompt_left() } else { 0 }).collect();
    let mut take: StepList<usize> = smallvec::smallvec![0; seqs.len()];
    if let Some(oldest) = left.iter().position(|&l| l > 0) {
        take[oldest] = left[oldest].min(budget.div_ceil(4));
        budget -= take[oldest];
    }
    let mut order: StepList<usize> = (0..seqs.len()).filter(|&i| left[i] > take[i]).collect();
    order.sort_by_key(|&i| left[i]);
    for i in order {
        let more = (left[i] - take[i]).min(budget);
        take[i] += more;
        budget -= more;
    }
    take
}
