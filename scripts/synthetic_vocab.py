"""The llama-spm vocabulary cut to its first n entries, as the tiny synthetic models carry it
(imported by scripts/make-synthetic-{moe,dense,quant}.py; unk, bos, eos and the byte tokens come first,
so SPM tokenizes any text with byte fallback)."""


def copy_vocab(w, r, n_vocab, add_bos):
    """Writes the first `n_vocab` tokens of reader `r`'s SPM vocabulary into writer `w`."""
    f = r.fields
    toks = [bytes(f["tokenizer.ggml.tokens"].parts[i]).decode("utf-8") for i in f["tokenizer.ggml.tokens"].data[:n_vocab]]
    scores = [float(f["tokenizer.ggml.scores"].parts[i][0]) for i in f["tokenizer.ggml.scores"].data[:n_vocab]]
    types = [int(f["tokenizer.ggml.token_type"].parts[i][0]) for i in f["tokenizer.ggml.token_type"].data[:n_vocab]]
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(toks)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(add_bos)
