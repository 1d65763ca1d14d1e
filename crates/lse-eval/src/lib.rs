//! Scoring: window plans, LM-head reductions to NLL/top-K, KL bases, statistics and the JSON report.
