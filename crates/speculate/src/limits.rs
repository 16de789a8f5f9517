//! The bounds of a generation's forwards, shared by the loop, the cost model and the drafters:
//! a leaf that uses no other module of the crate.

/// Longest block the prefill sends in one forward (bounds activation memory).
pub const PREFILL_CHUNK: usize = 256;

/// Longest draft verified in one forward.
pub const MAX_DRAFT: usize = 15;
