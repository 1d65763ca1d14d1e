//! A decode step allocates nothing per layer (issue 15: "no per-step allocation"): the kernels'
//! and layers' per-call lists live on the stack and the activation buffers are reused from step
//! to step. What a step still allocates is what it hands out: the hidden rows `forward` returns
//! (one) and each sequence's top-k list (one per session), plus the amortised growth of a
//! sequence's tokens and text. Counted by a global allocator in this test binary (one test, so no
//! other test allocates meanwhile), pool threads included; before, a step of these 3–4-layer
//! models made 60–182.

use lse_engine::{Engine, EngineOptions, GenerateRequest, Prompt, SamplingParams, Sequence};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

fn count() {
    if COUNTING.load(Relaxed) {
        ALLOCATIONS.fetch_add(1, Relaxed);
    }
}

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Allocations per step of `sessions` greedy sequences decoding together (after their prompts
/// and a few warm-up steps), the median over 8 steps.
fn per_step(e: &Engine, sessions: usize) -> usize {
    let v = e.n_vocab() as u32;
    let mut seqs: Vec<Sequence> = (0..sessions)
        .map(|k| {
            let prompt = (0..24u32).map(|i| (i * 31 + 7 * k as u32 + 3) % v).collect();
            let req = GenerateRequest {
                prompt: Prompt::Tokens(prompt),
                max_tokens: 64,
                ignore_eos: true,
                sampling: SamplingParams { temperature: 0.0, ..Default::default() },
                ..Default::default()
            };
            e.start_sequence(&req).unwrap()
        })
        .collect();
    let mut refs: Vec<&mut Sequence> = seqs.iter_mut().collect();
    let mut counts = Vec::with_capacity(8);
    for step in 0..12 {
        ALLOCATIONS.store(0, Relaxed);
        COUNTING.store(step >= 4, Relaxed);
        let stats = e.step(&mut refs, 512).unwrap();
        COUNTING.store(false, Relaxed);
        if step >= 4 {
            assert_eq!(stats.decode_rows, sessions, "step {step}: every sequence decodes");
            counts.push(ALLOCATIONS.load(Relaxed));
        }
    }
    counts.sort_unstable();
    counts[counts.len() / 2]
}

#[test]
fn decode_allocates_nothing_per_layer() {
    for name in ["llama-tiny-q4_0", "qwen3-tiny", "gemma3-tiny"] {
        let path = lse_testdata::golden(&format!("synthetic/{name}.gguf"));
        let e = Engine::load(&path, EngineOptions { threads: 2, ..Default::default() }).unwrap();
        for sessions in [1, 8] {
            let n = per_step(&e, sessions);
            eprintln!("{name}: {sessions} session(s): {n} allocations per decode step");
            // one allocation more per layer would already break the one-session bound
            assert!(n <= 2 * sessions + 2, "{name}, {sessions} sessions: {n} allocations per decode step");
        }
    }
}
