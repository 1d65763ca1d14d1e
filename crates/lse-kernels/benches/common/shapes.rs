//! `LSE_BENCH_SHAPES`: a bench's list of weight shapes, `type:AxB[xC]` separated by commas.

use lse_kernels::GgmlType;

/// The shapes in `LSE_BENCH_SHAPES` with `dims` numbers each (e.g. `q6_k:640x2048x512` for 3),
/// None when it is unset.
pub fn from_env(dims: usize) -> Option<Vec<(GgmlType, Vec<usize>)>> {
    let parse = |s: &str| {
        let parsed = s.trim().split_once(':').and_then(|(t, d)| {
            let t = lse_kernels::packed::PACKED_TYPES.into_iter().find(|p| p.name().eq_ignore_ascii_case(t))?;
            let d: Vec<usize> = d.split('x').map(|v| v.parse().ok()).collect::<Option<_>>()?;
            (d.len() == dims).then_some((t, d))
        });
        parsed.unwrap_or_else(|| panic!("LSE_BENCH_SHAPES: {s:?} is not a type and {dims} numbers joined by x"))
    };
    std::env::var("LSE_BENCH_SHAPES").ok().map(|v| v.split(',').map(parse).collect())
}
