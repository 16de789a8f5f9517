//! What parsing a header may cost. A file can claim any count or length; the reader checks each
//! against the bytes that remain, and these limits bound what the parsed result takes beyond
//! that: how deep metadata arrays nest (stack) and how much memory metadata and the tensor
//! table take once parsed (heap), accounted before each allocation.

use std::mem::size_of;

use crate::metadata::Value;
use crate::tensor_info::TensorInfo;
use crate::{GgufError, Result};

/// Deepest nesting of metadata arrays accepted (an array of scalars is depth 1). Real files
/// only hold arrays of scalars or strings, and llama.cpp rejects nested arrays outright, so 4
/// is generous; it keeps the recursive value parser's stack use to a few frames.
pub const MAX_ARRAY_DEPTH: u32 = 4;

/// Default memory budget, in bytes, for a parsed header (metadata and tensor table).
///
/// Measured on a 64-bit target (`Gguf::memory`, see crates/model/tests/limits.rs):
/// Qwen2.5-Coder-0.5B, whose 151,936 tokens, 151,387 merges and 151,936 token types dominate,
/// is charged 5.7 MiB; SmolLM2-135M (49,152 tokens) 1.7 MiB: arrays keep their elements
/// compactly (crate::array), about their size in the file. 128 MiB leaves room for vocabularies
/// many times larger, while a hostile file can turn a byte it holds into at most a few bytes of
/// parsed header (an empty nested array: 12 bytes in the file, one `Array` parsed).
pub const DEFAULT_HEADER_BUDGET: u64 = 128 << 20;

/// One metadata entry besides its value's heap parts: the (key, value) pair in the entry list,
/// and the copy of the key with its index in the lookup map.
pub(crate) const ENTRY_SIZE: u64 =
    (size_of::<(String, Value)>() + size_of::<String>() + size_of::<usize>()) as u64;
/// One tensor table entry, and the copy of its name with its position in the lookup index.
pub(crate) const TENSOR_SIZE: u64 =
    (size_of::<TensorInfo>() + size_of::<String>() + size_of::<usize>()) as u64;

/// Memory charged so far against a limit.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    pub used: u64,
    pub limit: u64,
}

impl Budget {
    pub fn new(limit: u64) -> Self {
        Budget { used: 0, limit }
    }

    /// Charges `count * each` bytes for `what`, failing before the caller allocates them.
    pub fn charge(&mut self, count: u64, each: u64, what: &str) -> Result<()> {
        let needed = count
            .checked_mul(each)
            .and_then(|n| n.checked_add(self.used));
        match needed {
            Some(n) if n <= self.limit => {
                self.used = n;
                Ok(())
            }
            _ => Err(GgufError::HeaderTooLarge {
                what: what.to_owned(),
                needed: needed.unwrap_or(u64::MAX),
                limit: self.limit,
            }),
        }
    }
}
