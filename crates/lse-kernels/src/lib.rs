//! Quantized block formats, dot products and matrix kernels (scalar reference + runtime-chosen SIMD).
