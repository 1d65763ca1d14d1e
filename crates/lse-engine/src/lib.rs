//! The model engine: architectures, weights, KV cache, sessions and the prefill pass plan.
