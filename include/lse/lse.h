/*
 * lse.h - the C API of LSE, a GGUF inference engine that scores text the way llama.cpp's
 * llama-perplexity does (perplexity and KL divergence), through the same prefill path a served
 * request gets.
 *
 * Library: liblse (liblse.so on Linux), built by `cargo build --release -p lse-capi` into
 * target/release/. Compile and link:
 *
 *     cc -I include my.c -L target/release -llse -Wl,-rpath,$PWD/target/release
 *
 * ---------------------------------------------------------------------------------------------
 * Error convention
 *   Every function that can fail returns int: 0 (LSE_OK) on success, non-zero on failure
 *   (LSE_ERR_ARGUMENT, LSE_ERR_RUN, LSE_ERR_INTERNAL below). On failure, when `err` is not NULL,
 *   *err receives one line of UTF-8 text naming the cause (e.g. the JSON field and the allowed
 *   values); free it with lse_string_free. On success *err is set to NULL. `err` itself may be
 *   NULL when no message is wanted. No function aborts the host process: NULL pointers, text
 *   that is not UTF-8 or not JSON, wrong field types and invalid values are errors, and a bug
 *   inside the library (a Rust panic) is caught at the boundary and returned as LSE_ERR_INTERNAL.
 *
 * Ownership
 *   - Strings passed in (options_json, request_json) are borrowed for the duration of the call
 *     only; the caller keeps ownership. They must be NUL-terminated UTF-8.
 *   - Strings handed out (*json_out, *err) are allocated by the library and owned by the caller,
 *     who must free each exactly once with lse_string_free (never with free()).
 *   - An engine handle (*out of lse_engine_open) is owned by the caller, who must free it exactly
 *     once with lse_engine_close. On failure *out is set to NULL and nothing needs closing.
 *
 * Thread safety
 *   The library is safe to call from several threads. Calls on one engine are serialised: a
 *   lse_perplexity call waits (blocks) until the call in flight on the same engine has finished,
 *   then runs; each call still uses all the engine's compute threads. Different engines run
 *   independently. lse_engine_close must not be called while another thread is still using that
 *   engine (the caller joins its threads first).
 *
 * Progress
 *   The library prints no progress; it writes nothing to stdout or stderr in normal operation.
 * ---------------------------------------------------------------------------------------------
 */
#ifndef LSE_LSE_H
#define LSE_LSE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes. */
#define LSE_OK 0           /* success */
#define LSE_ERR_ARGUMENT 1 /* a NULL pointer, text that is not UTF-8 or not valid JSON, an unknown
                              field, a wrong field type or an invalid value */
#define LSE_ERR_RUN 2      /* the model could not be loaded, or the run failed (text too short for
                              the plan, window larger than kv_len, KLD base mismatch or corrupt,
                              unwritable output, engine error) */
#define LSE_ERR_INTERNAL 3 /* a bug inside the library, caught at the boundary */

/* An opened model: weights, tokenizer, compute threads. Opaque. */
typedef struct lse_engine lse_engine;

/*
 * lse_engine_open - load a model.
 *
 * options_json: a JSON object with the engine options of the command line (SPEC §2), named
 *   without the leading dashes and with '_' for '-'. null or an absent field = the default.
 *     "model"            string, required: a .gguf file, or a folder holding exactly one model
 *                        (or the shards of one split model), or any shard of a split model
 *     "pool"             string: "cpu" (default "cpu")
 *     "dialect"          string: "simd" (best runtime-detected SIMD) or "scalar" (default "simd")
 *     "threads"          integer >= 1: compute threads (default: the number of physical cores)
 *     "batch_size"       integer >= 1: tokens per prefill pass (default 2048)
 *     "ubatch_size"      integer >= 1, <= batch_size: tokens per kernel launch (default 512)
 *     "kv_cache_dtype"   string: "f32", "f16", "bf16" or "q8_0" (default "f16")
 *     "kv_len"           integer >= 1: KV capacity per session in tokens (default: the model's
 *                        context length); every window must fit
 *     "flash_prefill_v2" boolean (or "on"/"off"): fused tiled attention (true, default) or dense
 *                        attention (false) - the command line's --FlashPrefillV2
 *     "no_cpu_fallback"  boolean: fail an operation that has no kernel on the pool instead of
 *                        running it on the CPU (default false; env LSE_REQUIRE_DEVICE_KERNELS=1
 *                        turns it on)
 *     "no_mtp"           boolean: accepted and recorded; scoring never uses a speculative decoder
 *     "simd"             string: "avx512", "avx2", "neon" or "scalar": cap the kernels at that
 *                        level (one level per process; the command line's --simd)
 *     "huge_pages"       boolean: packed weights on huge pages, for decoding, which streams them
 *                        every token (default false; the command line's --huge-pages)
 *   Unknown fields are refused (a misspelt option is never silently ignored).
 *   Example: {"model": "models/SmolLM2-135M-Instruct.Q4_1.gguf", "threads": 4, "kv_len": 4096}
 * out: receives the engine handle (close it with lse_engine_close); set to NULL on failure.
 * err: receives the error message on failure (see Error convention); may be NULL.
 *
 * Returns LSE_OK, LSE_ERR_ARGUMENT (NULL options_json or out, bad JSON, bad option), LSE_ERR_RUN
 * (model missing, unreadable, corrupt or unsupported) or LSE_ERR_INTERNAL.
 */
int lse_engine_open(const char *options_json, lse_engine **out, char **err);

/*
 * lse_engine_info - what an opened engine holds.
 *
 * engine: a handle from lse_engine_open, not yet closed. Must not be NULL.
 * json_out: receives {"object": "lse.engine", "architecture", "model_name", "n_vocab",
 *   "kv_capacity", "config" (the report's SPEC §4 config object), "load_notes" (array of strings:
 *   what loading set aside, e.g. a special token id outside the vocabulary and the default used;
 *   the library prints nothing, so these are said here)}. Free it with lse_string_free. Set to
 *   NULL on failure. Must not be NULL.
 * err: receives the error message on failure; may be NULL.
 *
 * Answers at once, also while another call on the same engine is in flight. Returns LSE_OK,
 * LSE_ERR_ARGUMENT (NULL engine or json_out) or LSE_ERR_INTERNAL.
 */
int lse_engine_info(lse_engine *engine, char **json_out, char **err);

/*
 * lse_perplexity - score a text (or token ids, or prompt/response pairs) and return the report.
 *
 * engine: a handle from lse_engine_open, not yet closed. Must not be NULL.
 * request_json: a JSON object (SPEC §7); null or an absent field = the default:
 *     exactly one input:
 *     "text"              string: UTF-8 text, tokenized once as a prompt with no chat template,
 *                         used exactly as given (the command line's --perplexity FILE removes one
 *                         trailing "\n" from the file first; do that yourself to match it)
 *     "tokens"            array of token ids (integers), scored as given
 *     "pairs"             array of {"prompt": string, "response": string}: conditional perplexity
 *                         of the responses (method "pairs")
 *     options:
 *     "method"            string: "chunks" (default, llama.cpp's) or "sliding"
 *     "ctx"               integer: tokens per chunk or window (default 512)
 *     "stride"            integer: "sliding" only, tokens between window starts (default: ctx)
 *     "chunks"            integer >= 1: score only the first N chunks, windows or records
 *     "kld_base_out"      string: path where to record a KL-divergence base (relative paths are
 *                         relative to the process's working directory)
 *     "kld_top_k"         integer 1..32: ids recorded per scored token in that base (default 32; only with kld_base_out)
 *     "kld_base"          string: path of a base to compare against (LSE format, or a llama.cpp
 *                         --kl-divergence-base file); adds the "kld" object to the report
 *     "include_windows"   boolean: include the per-window array "windows" (default false)
 *     "include_token_ids" boolean: include the array "token_ids" (default false)
 *     "shard"             {"index": I, "count": N}: score only shard I (0-based) of N contiguous
 *                         shares of the windows and write a shard file to "shard_out" (string,
 *                         required with it) instead of returning a report; merge the files with
 *                         lse-server --perplexity-merge or the Python package's lse.merge_shards
 *     "model_sha256"      string: SHA-256 of the model's bytes (a split model's shards one after
 *                         another, in order), recorded in a shard file's plan so that shards of
 *                         different models do not merge (absent: none recorded)
 *   Unknown fields are refused.
 *   Example: {"text": "...", "ctx": 128, "chunks": 3}
 * json_out: receives the report on success: one JSON object, keys in the order of SPEC §4
 *   ("object": "lse.perplexity", "tokens", "token_ids_sha256", "method", "ctx", "stride",
 *   "windows_scored", "scored_tokens", "mean_nll", "perplexity", "perplexity_uncertainty",
 *   "elapsed_seconds", "prefill_tokens", "prefill_tokens_per_second", "config", and "kld",
 *   "windows", "token_ids" when asked); the same report the command line prints. Free it with
 *   lse_string_free. Set to NULL on failure. Must not be NULL.
 * err: receives the error message on failure (see Error convention); may be NULL.
 *
 * Blocks while another call on the same engine is in flight (see Thread safety).
 * Returns LSE_OK, LSE_ERR_ARGUMENT (NULL engine, request_json or json_out, bad JSON, an unknown
 * field, a wrong field type, an invalid value), LSE_ERR_RUN (e.g. the text holds fewer than two
 * chunks, a window exceeds kv_len, a KLD base does not match) or LSE_ERR_INTERNAL.
 */
int lse_perplexity(lse_engine *engine, const char *request_json, char **json_out, char **err);

/*
 * lse_generate - prompt the model and return the generated text.
 *
 * engine: a handle from lse_engine_open, not yet closed. Must not be NULL.
 * request_json: a JSON object; an absent field takes the default (llama.cpp's):
 *     "prompt"            string (tokenized as a prompt: BOS/EOS as the vocabulary asks, special-
 *                         token text parsed), array of token ids (fed as given), or fill in the
 *                         middle: {"prefix": string, "suffix": string, optional "middle": string
 *                         (the start of the gap), optional "files": [{"filename", "text"}] (then
 *                         llama-server's /infill layout)} on a model with FIM tokens. Required.
 *     "max_tokens"        integer >= 0: tokens to generate at most (default 128)
 *     "temperature"       number >= 0; 0 is greedy (default 0.8)
 *     "top_k"             integer >= 0; 0 keeps all (default 40)
 *     "top_p"             number in (0, 1] (default 0.95)
 *     "min_p"             number in [0, 1] (default 0.05)
 *     "repeat_penalty"    number > 0; 1 is off (default 1)
 *     "repeat_last_n"     integer: tokens the penalties look back over, prompt included; 0 off,
 *                         -1 the whole context (default 64)
 *     "presence_penalty", "frequency_penalty"   numbers (default 0)
 *     "seed"              integer >= 0: the same seed gives the same text (default: fresh)
 *     "logit_bias"        object {"token id": number, ...} or list [[id, number], ...] (llama-
 *                         server's form): added to those logits before the
 *                         other samplers; false instead of a number bans the token; a key given
 *                         twice gets the sum (default {})
 *     "stop"              array of strings: stop before the first of them
 *     "ignore_eos"        boolean: go on past end-of-generation tokens (default false)
 *     "stop_token_ids"    array of token ids that end the generation as an end-of-generation
 *                         token does, even with ignore_eos (vLLM's; default [])
 *     "min_tokens"        integer >= 0: tokens generated before an end-of-generation or stop
 *                         token id may be sampled (vLLM's; default 0)
 *     "top_logprobs"      integer up to the vocabulary size: alternatives reported per step (default 0)
 *     "post_sampling_probs" boolean: with top_logprobs, also report each step's probabilities
 *                         after the sampler chain, the pick's and its top_logprobs best
 *                         candidates' at the temperature (greedy: the pick alone, 1;
 *                         llama-server's) (default false)
 *     "add_special"       boolean: add BOS/EOS to a text prompt as the vocabulary asks (default true)
 *     "json_object"       boolean: JSON mode, sample only tokens that keep the text one JSON
 *                         object and stop ("stop") when it closes (default false)
 *     "json_schema"       object: the same for a value of this JSON schema (the subset the README
 *                         lists; others are refused) (default none)
 *   Unknown fields are refused. Example: {"prompt": "Hello", "max_tokens": 16, "temperature": 0}
 * json_out: receives {"object": "lse.generation", "prompt_tokens", "ids", "text", "finish_reason"
 *   ("eos", "stop" or "length"), "logprobs", "top2_margin", ["top_logprobs"], ["sampled_probs",
 *   "top_probs"] (with post_sampling_probs and top_logprobs), "prompt_seconds",
 *   "decode_seconds", "decode_tokens_per_second"}, the object `lse-server --generate` prints.
 *   Free it with lse_string_free. Set to NULL on failure. Must not be NULL.
 * err: receives the error message on failure; may be NULL.
 *
 * Blocks while another call on the same engine is in flight. Returns LSE_OK, LSE_ERR_ARGUMENT
 * (NULL pointers, bad JSON, an unknown field, an empty prompt, an invalid value), LSE_ERR_RUN
 * (e.g. a prompt longer than kv_len, a token id outside the vocabulary) or LSE_ERR_INTERNAL.
 */
int lse_generate(lse_engine *engine, const char *request_json, char **json_out, char **err);

/*
 * lse_embed - embed texts: their final-normed hidden rows pooled into one vector each (what
 * llama-server --embeddings --pooling P returns).
 *
 * engine: a handle from lse_engine_open, not yet closed. Must not be NULL.
 * request_json: a JSON object:
 *     "input"             a string (tokenized as a prompt: BOS/EOS as the vocabulary asks, special-
 *                         token text parsed), an array of token ids, or an array of those (at
 *                         most 2048). Required.
 *     "pooling"           "mean", "cls" or "last" (default: the model's own pooling type; generative
 *                         models have none, and the call fails without one)
 *     "normalize"         integer, llama.cpp's embd_normalize: -1 none, 0 max-abs to 32760,
 *                         1 taxicab, 2 Euclidean, p > 2 the p-norm (default 2)
 *   Unknown fields are refused. Example: {"input": ["a text", "another"], "pooling": "mean"}
 * json_out: receives {"object": "lse.embeddings", "pooling", "normalize", "prompt_tokens",
 *   "embeddings": [[floats of n_embd], ...] in input order}. Free it with lse_string_free. Set to
 *   NULL on failure. Must not be NULL.
 * err: receives the error message on failure; may be NULL.
 *
 * Blocks while another call on the same engine is in flight. Returns LSE_OK, LSE_ERR_ARGUMENT
 * (NULL pointers, bad JSON, an unknown field, an empty input, an invalid value), LSE_ERR_RUN
 * (e.g. no pooling, an input longer than kv_len, a token id outside the vocabulary) or
 * LSE_ERR_INTERNAL.
 */
int lse_embed(lse_engine *engine, const char *request_json, char **json_out, char **err);

/*
 * lse_string_free - free a string returned by this library (*json_out, *err).
 * NULL is ignored. Each string must be freed exactly once, and only with this function.
 */
void lse_string_free(char *s);

/*
 * lse_engine_close - close an engine and free its memory (weights, threads).
 * NULL is ignored. Each handle must be closed exactly once, after every call using it has
 * returned; the handle is invalid afterwards.
 */
void lse_engine_close(lse_engine *engine);

#ifdef __cplusplus
}
#endif

#endif /* LSE_LSE_H */
