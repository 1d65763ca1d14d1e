//! llama.cpp-exact tokenizers (BPE with pre-tokenizers, SentencePiece) built from a GGUF vocabulary.
