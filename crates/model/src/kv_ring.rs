//! Sliding-window layers that keep only their window in the KV cache: the ring's size, which
//! layers keep one, and how far back a cache of rings can be truncated exactly. Shared by the
//! engines, and by the memory plans that count the rows.
//!
//! A sliding-window layer's query at position `p` sees keys at positions in `(p - window, p]`
//! only. Such a layer keeps a ring of [`ring_slots`] slots, the entry at cache index `i` in slot
//! `i % slots`: the window plus a block of [`RING_BLOCK`] new rows, so the rows a block writes
//! never overwrite one that any of its queries sees, and a block can still be truncated or
//! compacted after its forward. Global layers, and sliding ones whose ring would not be smaller
//! than the cache, keep every entry.

use crate::{Batch, Mask, ModelError, Plan, Result};

/// Most rows a forward writes at once into a ring. Longer causal blocks are run in parts of
/// this many rows (every row's result is the same in any block); a longer tree is refused. As
/// long as the prefill's blocks, so a prompt's chunks go in whole.
pub const RING_BLOCK: usize = 256;

/// Slots of the ring of a sliding-window layer of `window`: the window and [`RING_BLOCK`],
/// rounded up to a multiple of 64 (the CPU engine reads the cache in aligned chunks of 64
/// slots, which then never wrap).
pub fn ring_slots(window: usize) -> usize {
    (window + RING_BLOCK).next_multiple_of(64)
}

impl Plan {
    /// Per layer, the ring's slots for a cache of `capacity` entries: `Some` for a
    /// sliding-window layer whose ring is smaller than the cache.
    pub fn rings(&self, capacity: usize) -> Vec<Option<usize>> {
        self.layers
            .iter()
            .map(|l| l.attention.window.map(ring_slots).filter(|&r| r < capacity))
            .collect()
    }

    /// Per layer, the KV entries an engine keeps for a cache of `capacity` entries (what the
    /// memory plans count).
    pub fn kv_rows(&self, capacity: usize) -> Vec<usize> {
        self.rings(capacity)
            .into_iter()
            .map(|r| r.unwrap_or(capacity))
            .collect()
    }

    /// Bytes of an f16 KV cache (keys and values) of `capacity` entries, rings counted.
    pub fn kv_cache_bytes(&self, capacity: usize) -> u64 {
        let row = 2 * 2 * self.config.kv_dim() as u64;
        (self.kv_rows(capacity).iter())
            .map(|&r| r as u64 * row)
            .fold(0u64, u64::saturating_add)
    }
}

/// The bookkeeping of a cache whose sliding-window layers keep rings: which entries the rings
/// still hold, hence the shortest length a truncation keeps exactly.
#[derive(Clone, Debug, Default)]
pub struct RingLimits {
    /// (slots, window) of each ring.
    rings: Vec<(usize, usize)>,
    /// One past the highest cache index written since the cache was last emptied: the rings
    /// hold the entries from `written - slots` on (those a later write did not replace).
    written: usize,
}

impl RingLimits {
    /// The limits of `plan`'s rings for a cache of `capacity` entries.
    pub fn new(plan: &Plan, capacity: usize) -> Self {
        let rings = (plan.rings(capacity).into_iter().zip(&plan.layers))
            .filter_map(|(r, l)| Some((r?, l.attention.window?)))
            .collect();
        RingLimits { rings, written: 0 }
    }

    /// Whether any layer keeps a ring.
    pub fn any(&self) -> bool {
        !self.rings.is_empty()
    }

    /// Records a forward's writes at cache indices `..end`.
    pub fn wrote(&mut self, end: usize) {
        self.written = self.written.max(end);
    }

    /// The shortest length other than 0 that a truncation keeps exactly: the next token at
    /// position `len` sees a ring's entries from `len - window + 1` on, which must not have
    /// been replaced.
    pub fn floor(&self) -> usize {
        (self.rings.iter())
            .map(|&(slots, window)| (self.written + window).saturating_sub(slots + 1))
            .max()
            .unwrap_or(0)
    }

    /// The length a truncation of a cache of `cache_len` entries to `len` keeps: `len` (at
    /// most `cache_len`), or 0 where the rings no longer hold what `len` needs. Emptied, the
    /// cache's rings start over.
    pub fn truncate(&mut self, cache_len: usize, len: usize) -> usize {
        let len = len.min(cache_len);
        let kept = if len < self.floor() { 0 } else { len };
        if kept == 0 {
            self.written = 0;
        }
        kept
    }

    /// Refuses a tree block longer than [`RING_BLOCK`] when a layer keeps a ring (its rows
    /// would replace entries its own queries see; a causal block is split instead).
    pub fn check(&self, batch: &Batch) -> Result<()> {
        if self.any() && batch.len() > RING_BLOCK && matches!(batch.mask, Mask::Tree(_)) {
            return Err(ModelError::InvalidBatch(format!(
                "a tree of {} tokens: at most {RING_BLOCK} with sliding-window rings",
                batch.len()
            )));
        }
        Ok(())
    }
}

/// The parts of at most [`RING_BLOCK`] rows to run `batch` in where rings need them (a causal
/// batch, longer than that, with rings): `(rows, batch of those rows)`; `None` where the batch
/// runs whole.
pub fn ring_parts(
    batch: &Batch,
    limits: &RingLimits,
) -> Option<Vec<(std::ops::Range<usize>, Batch)>> {
    if !limits.any() || batch.len() <= RING_BLOCK || batch.mask != Mask::Causal {
        return None;
    }
    let parts = (0..batch.len()).step_by(RING_BLOCK).map(|start| {
        let end = (start + RING_BLOCK).min(batch.len());
        let part = Batch {
            tokens: batch.tokens[start..end].to_vec(),
            positions: batch.positions[start..end].to_vec(),
            mask: Mask::Causal,
            first_output: batch.first_output.clamp(start, end) - start,
        };
        (start..end, part)
    });
    Some(parts.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_sizes_and_the_truncation_floor() {
        assert_eq!(ring_slots(512), 768);
        assert_eq!(ring_slots(10), 320);
        let mut limits = RingLimits {
            rings: vec![(320, 10)],
            written: 0,
        };
        assert_eq!(limits.floor(), 0);
        limits.wrote(300);
        assert_eq!(limits.floor(), 0);
        limits.wrote(400);
        // Entries from 80 on are held; a query at 89 sees 80..=89.
        assert_eq!(limits.floor(), 89);
        assert_eq!(limits.truncate(400, 89), 89);
        assert_eq!(limits.truncate(89, 88), 0);
        assert_eq!(limits.floor(), 0);
        assert!(!RingLimits::default().any());
        assert_eq!(RingLimits::default().truncate(5, 3), 3);
    }

    #[test]
    fn long_causal_blocks_run_in_parts_and_long_trees_are_refused() {
        let limits = RingLimits {
            rings: vec![(320, 10)],
            written: 0,
        };
        let tokens: Vec<u32> = (0..600).collect();
        let batch = Batch::causal(&tokens, 7).logits_for_last(300);
        let parts = ring_parts(&batch, &limits).unwrap();
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1].0, 256..512);
        assert_eq!(parts[1].1.positions[0], 7 + 256);
        let outputs: Vec<usize> = parts.iter().map(|(_, b)| b.n_outputs()).collect();
        assert_eq!(outputs, vec![0, 212, 88]);
        assert!(ring_parts(&batch, &RingLimits::default()).is_none());
        let parents: Vec<Option<usize>> = (0..300usize).map(|i| i.checked_sub(1)).collect();
        let tree = Batch::tree(&tokens[..300], &parents, 0).unwrap();
        assert!(limits.check(&tree).is_err());
        assert!(RingLimits::default().check(&tree).is_ok());
    }
}
