//! Generation: the request (options and validation in one place), the sampler chain, streamed
//! text with stop strings, and sequences driven by the batched forward ([`crate::Engine::step`]).

mod constraint;
mod infill;
pub mod logit_bias;
mod report;
mod request;
mod json_schema;
mod sampler;
mod sequence;
mod string_format;
mod text;

pub use report::GenerationReport;
pub use infill::{Infill, InfillFile};
pub use json_schema::{Schema, SchemaState};
pub use logit_bias::LogitBias;
pub use request::{GenerateRequest, Prompt, SamplingParams};
pub(crate) use request::bad_field;
pub use sampler::{argmax, Sampler};
pub use sequence::{FinishReason, PostSampling, Sequence, StepStats, StepToken};
pub use text::TextStream;
