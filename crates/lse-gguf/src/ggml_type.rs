//! ggml tensor element types: numeric ids, names and block layouts.
//!
//! This table is the one place in the workspace where these facts live; the kernels crate reads
//! block sizes from here.

/// A ggml tensor type, with the numeric id ggml and GGUF use for it.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ2_XXS,
    IQ2_XS,
    IQ3_XXS,
    IQ1_S,
    IQ4_NL,
    IQ3_S,
    IQ2_S,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    IQ1_M,
    BF16,
    TQ1_0,
    TQ2_0,
    MXFP4,
    NVFP4,
    Q1_0,
    Q2_0,
}

/// (type, id, name, elements per block, bytes per block), as in ggml's `ggml.h` / `ggml.c`
/// (llama.cpp 0c1e570). Ids 4, 5, 31-33 and 36-38 belong to layouts ggml has since removed;
/// they are unknown here as they are in ggml.
const TABLE: &[(GgmlType, u32, &str, usize, usize)] = &[
    (GgmlType::F32, 0, "f32", 1, 4),
    (GgmlType::F16, 1, "f16", 1, 2),
    (GgmlType::Q4_0, 2, "q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "q2_K", 256, 84),
    (GgmlType::Q3_K, 11, "q3_K", 256, 110),
    (GgmlType::Q4_K, 12, "q4_K", 256, 144),
    (GgmlType::Q5_K, 13, "q5_K", 256, 176),
    (GgmlType::Q6_K, 14, "q6_K", 256, 210),
    (GgmlType::Q8_K, 15, "q8_K", 256, 292),
    (GgmlType::IQ2_XXS, 16, "iq2_xxs", 256, 66),
    (GgmlType::IQ2_XS, 17, "iq2_xs", 256, 74),
    (GgmlType::IQ3_XXS, 18, "iq3_xxs", 256, 98),
    (GgmlType::IQ1_S, 19, "iq1_s", 256, 50),
    (GgmlType::IQ4_NL, 20, "iq4_nl", 32, 18),
    (GgmlType::IQ3_S, 21, "iq3_s", 256, 110),
    (GgmlType::IQ2_S, 22, "iq2_s", 256, 82),
    (GgmlType::IQ4_XS, 23, "iq4_xs", 256, 136),
    (GgmlType::I8, 24, "i8", 1, 1),
    (GgmlType::I16, 25, "i16", 1, 2),
    (GgmlType::I32, 26, "i32", 1, 4),
    (GgmlType::I64, 27, "i64", 1, 8),
    (GgmlType::F64, 28, "f64", 1, 8),
    (GgmlType::IQ1_M, 29, "iq1_m", 256, 56),
    (GgmlType::BF16, 30, "bf16", 1, 2),
    (GgmlType::TQ1_0, 34, "tq1_0", 256, 54),
    (GgmlType::TQ2_0, 35, "tq2_0", 256, 66),
    (GgmlType::MXFP4, 39, "mxfp4", 32, 17),
    (GgmlType::NVFP4, 40, "nvfp4", 64, 36),
    (GgmlType::Q1_0, 41, "q1_0", 128, 18),
    (GgmlType::Q2_0, 42, "q2_0", 64, 18),
];

impl GgmlType {
    /// Every known type, in id order.
    pub fn all() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|e| e.0)
    }

    /// The type with ggml's numeric id, or `None` for an id ggml does not (or no longer) define.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        TABLE.iter().find(|e| e.1 == id).map(|e| e.0)
    }

    fn entry(self) -> &'static (GgmlType, u32, &'static str, usize, usize) {
        // The table lists every variant in declaration order.
        &TABLE[self as usize]
    }

    /// ggml's numeric id.
    pub fn id(self) -> u32 {
        self.entry().1
    }

    /// ggml's short name ("f32", "q4_K", ...).
    pub fn name(self) -> &'static str {
        self.entry().2
    }

    /// Elements per block (1 for plain types, 32 for the legacy quants, 256 for k- and i-quants).
    pub fn block_size(self) -> usize {
        self.entry().3
    }

    /// Bytes per block.
    pub fn type_size(self) -> usize {
        self.entry().4
    }

    /// Whether the type is a block quantisation (block size above 1).
    pub fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes in a row of `n` elements; `None` when `n` is not a whole number of blocks or the
    /// size overflows.
    pub fn row_bytes(self, n: usize) -> Option<usize> {
        let bs = self.block_size();
        if !n.is_multiple_of(bs) {
            return None;
        }
        (n / bs).checked_mul(self.type_size())
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_order_matches_declaration() {
        for (i, e) in TABLE.iter().enumerate() {
            assert_eq!(e.0 as usize, i, "{} out of order", e.2);
            assert_eq!(GgmlType::from_id(e.1), Some(e.0));
        }
    }
}
