//! The KV cache in f16 (as llama.cpp's default cache and the GPU engine keep it).

use half::f16;
use half::slice::HalfFloatSliceExt;
use runahead_model::{ModelError, Result};

/// Per layer, keys and values, each KV head's entries in a block of their own: `[kv_heads,
/// slots, head_dim]`, entry `slot` of head `h` at `(h * slots + slot) * head_dim`. A row's
/// attention reads one head at a time, so each head is one contiguous stream (strided through
/// rows holding every head, a cache behind 1,024 entries was read at 20 GB/s where one stream a
/// head reads 26). Grown on demand, by half at least, so short runs stay small.
///
/// A sliding-window layer whose ring is smaller than the cache (see [`runahead_model::kv_ring`])
/// holds at most its ring's slots, cache index `i` in slot `i % slots`: every index below the
/// layer's slots is its own slot until the ring is full, so growing moves nothing.
pub struct KvCache {
    pub k: Vec<Vec<f16>>, // [n_layers][kv_heads * slots * head_dim]
    pub v: Vec<Vec<f16>>, // [n_layers][kv_heads * slots * head_dim]
    pub len: usize,
    pub capacity: usize,
    /// Slots each head's block of a full layer holds now (at most `capacity`).
    pub slots: usize,
    /// Per layer: the ring's slots of a sliding-window layer that keeps one.
    rings: Vec<Option<usize>>,
    kv_heads: usize,
    head_dim: usize,
}

impl KvCache {
    /// A cache of `capacity` entries; `rings`: per layer, the slots of its ring, if any.
    pub fn new(
        rings: Vec<Option<usize>>,
        capacity: usize,
        kv_heads: usize,
        head_dim: usize,
    ) -> Self {
        let n_layers = rings.len();
        KvCache {
            k: vec![Vec::new(); n_layers],
            v: vec![Vec::new(); n_layers],
            len: 0,
            capacity,
            slots: 0,
            rings,
            kv_heads,
            head_dim,
        }
    }

    /// Slots each head's block of layer `layer` holds now: cache index `i` is in slot
    /// `i % layer_slots`.
    pub fn layer_slots(&self, layer: usize) -> usize {
        self.rings[layer].map_or(self.slots, |r| self.slots.min(r))
    }

    /// Elements from one head's block to the next in layer `layer`.
    pub fn head_stride(&self, layer: usize) -> usize {
        self.layer_slots(layer) * self.head_dim
    }

    /// Makes room for slots up to `end` (at most `capacity`: the engine checks batches
    /// against it first), moving each head's entries to its place in the larger blocks.
    pub fn reserve(&mut self, end: usize) {
        if end <= self.slots {
            return;
        }
        let slots = end
            .max(self.slots + self.slots / 2)
            .min(self.capacity.max(end));
        let hd = self.head_dim;
        for l in 0..self.k.len() {
            let old = self.layer_slots(l) * hd;
            let new = self.rings[l].map_or(slots, |r| slots.min(r));
            if new * hd == old {
                continue;
            }
            for buf in [&mut self.k[l], &mut self.v[l]] {
                let mut grown = vec![f16::ZERO; self.kv_heads * new * hd];
                for (h, block) in buf.chunks_exact(old.max(1)).enumerate() {
                    grown[h * new * hd..][..block.len()].copy_from_slice(block);
                }
                *buf = grown;
            }
        }
        self.slots = slots;
    }

    /// Stores `k` and `v` (`[n, kv_heads * head_dim]` each) of layer `layer` at cache indices
    /// `base..base + n`.
    pub fn write(&mut self, layer: usize, base: usize, k: &[f32], v: &[f32]) {
        let (hd, stride) = (self.head_dim, self.head_stride(layer));
        let slots = self.layer_slots(layer);
        for (src, dst) in [(k, &mut self.k[layer]), (v, &mut self.v[layer])] {
            for (i, entry) in src.chunks_exact(self.kv_heads * hd).enumerate() {
                for (h, head) in entry.chunks_exact(hd).enumerate() {
                    // The slice conversion rounds as `f16::from_f32` does (to nearest, ties to
                    // even), with F16C several at a time where the CPU has it.
                    let at = h * stride + (base + i) % slots * hd;
                    dst[at..at + hd].convert_from_f32_slice(head);
                }
            }
        }
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Keeps entries `..base` followed by `base + keep[k]`, moved to consecutive indices.
    pub fn compact(&mut self, base: usize, keep: &[usize]) -> Result<()> {
        // `base <= len` is checked first, so `len - base` cannot underflow.
        if base > self.len
            || keep.windows(2).any(|w| w[0] >= w[1])
            || keep.last().is_some_and(|&k| k >= self.len - base)
        {
            return Err(ModelError::InvalidBatch(format!(
                "cannot keep {keep:?} after slot {base} of a cache of {}",
                self.len
            )));
        }
        let hd = self.head_dim;
        for l in 0..self.k.len() {
            let (slots, stride) = (self.layer_slots(l), self.head_stride(l));
            for buf in [&mut self.k[l], &mut self.v[l]] {
                for h in 0..self.kv_heads {
                    for (dst, &src) in keep.iter().enumerate() {
                        let from = h * stride + (base + src) % slots * hd;
                        let to = h * stride + (base + dst) % slots * hd;
                        buf.copy_within(from..from + hd, to);
                    }
                }
            }
        }
        self.len = base + keep.len();
        Ok(())
    }

    /// Bytes the keys and values take now.
    pub fn bytes(&self) -> usize {
        (self.k.iter().chain(&self.v)).map(|b| b.len() * 2).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entries are stored as `f16::from_f32` rounds each value: halfway cases, subnormals,
    /// overflow, infinities and NaN included, over odd lengths (the slice conversion's tail).
    #[test]
    fn entries_round_like_one_value_at_a_time() {
        let kv_dim = 13;
        let mut values: Vec<f32> = (0..3 * kv_dim)
            .map(|i| (i as f32 - 17.0) * 0.3711 + 1e-3 * i as f32)
            .collect();
        let specials = [
            1.0 + f32::EPSILON * 4096.0, // 1 + 2^-11: halfway between two f16
            6.0e-8,                      // subnormal in f16
            70000.0,                     // beyond f16's range
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -0.0,
        ];
        values[..specials.len()].copy_from_slice(&specials);
        let mut cache = KvCache::new(vec![None], 8, 1, kv_dim);
        cache.reserve(5);
        let v: Vec<f32> = values.iter().map(|x| -x).collect();
        cache.write(0, 2, &values, &v);
        for (i, (&x, &y)) in values.iter().zip(&v).enumerate() {
            let at = 2 * kv_dim + i; // one head: its block is the whole cache
            assert_eq!(
                cache.k[0][at].to_bits(),
                f16::from_f32(x).to_bits(),
                "k {i}"
            );
            assert_eq!(
                cache.v[0][at].to_bits(),
                f16::from_f32(y).to_bits(),
                "v {i}"
            );
        }
    }

    /// Entries written over several blocks, the cache growing between them, then compacted:
    /// every (head, slot) holds its own values at `(h * slots + slot) * head_dim`.
    #[test]
    fn heads_keep_their_entries_through_growth_and_compaction() {
        let (heads, hd, layers) = (3, 5, 2);
        let value =
            |l: usize, h: usize, t: usize, e: usize| (l * 1000 + h * 100 + t * 7 + e) as f32;
        let entry = |l: usize, t: usize| -> Vec<f32> {
            (0..heads * hd)
                .map(|i| value(l, i / hd, t, i % hd))
                .collect()
        };
        let mut cache = KvCache::new(vec![None; layers], 64, heads, hd);
        let mut written = 0;
        for n in [1, 4, 2, 9, 1, 13] {
            cache.reserve(written + n);
            assert!(cache.slots >= written + n && cache.slots <= 64);
            for l in 0..layers {
                let k: Vec<f32> = (written..written + n).flat_map(|t| entry(l, t)).collect();
                let v: Vec<f32> = k.iter().map(|x| -x).collect();
                cache.write(l, written, &k, &v);
            }
            written += n;
            cache.len = written;
        }
        let check = |cache: &KvCache, slot: usize, token: usize| {
            for l in 0..layers {
                for h in 0..heads {
                    for e in 0..hd {
                        let at = (h * cache.slots + slot) * hd + e;
                        let want = value(l, h, token, e);
                        assert_eq!(cache.k[l][at].to_f32(), want, "k {l} {h} {slot} {e}");
                        assert_eq!(cache.v[l][at].to_f32(), -want, "v {l} {h} {slot} {e}");
                    }
                }
            }
        };
        (0..written).for_each(|t| check(&cache, t, t));
        cache.compact(20, &[1, 5, 9]).unwrap();
        assert_eq!(cache.len, 23);
        (0..20).for_each(|t| check(&cache, t, t));
        for (slot, token) in [(20, 21), (21, 25), (22, 29)] {
            check(&cache, slot, token);
        }
    }
}
