//! Plain CPU operations on f32 rows; the CPU backend calls these.

pub mod act;
pub mod attn_sinks;
pub mod attn_softcap;
pub mod norm;
pub mod rope;

pub mod delta_net;
pub mod ssm_conv;
