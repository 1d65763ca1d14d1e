//! GGUF v2/v3 reading by memory map, and a small writer for test fixtures.
