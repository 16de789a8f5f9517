//! The KV cache in f16 (as llama.cpp's default cache and the GPU engine keep it).

use half::f16;
use runahead_model::{ModelError, Result};

/// Per layer, keys and values: `[capacity, kv_dim]` each, row `slot` holding the entry of the
/// token in that slot; grown on demand so short runs stay small.
pub struct KvCache {
    pub k: Vec<Vec<f16>>, // [n_layers][slots * kv_dim]
    pub v: Vec<Vec<f16>>, // [n_layers][slots * kv_dim]
    pub len: usize,
    pub capacity: usize,
    pub kv_dim: usize,
}

impl KvCache {
    pub fn new(n_layers: usize, capacity: usize, kv_dim: usize) -> Self {
        KvCache {
            k: vec![Vec::new(); n_layers],
            v: vec![Vec::new(); n_layers],
            len: 0,
            capacity,
            kv_dim,
        }
    }

    /// Makes room for slots up to `end`.
    pub fn reserve(&mut self, end: usize) {
        let need = end * self.kv_dim;
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            if buf.len() < need {
                buf.resize(need, f16::ZERO);
            }
        }
    }

    /// Stores `k` and `v` (`[n, kv_dim]` each) of layer `layer` in slots `base..base + n`.
    pub fn write(&mut self, layer: usize, base: usize, k: &[f32], v: &[f32]) {
        let slots = base * self.kv_dim..base * self.kv_dim + k.len();
        for (dst, &src) in self.k[layer][slots.clone()].iter_mut().zip(k) {
            *dst = f16::from_f32(src);
        }
        for (dst, &src) in self.v[layer][slots].iter_mut().zip(v) {
            *dst = f16::from_f32(src);
        }
    }

    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Keeps entries `..base` followed by `base + keep[k]`, moved to consecutive slots.
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
        let dim = self.kv_dim;
        for buf in self.k.iter_mut().chain(self.v.iter_mut()) {
            for (dst, &src) in keep.iter().enumerate() {
                buf.copy_within(
                    (base + src) * dim..(base + src + 1) * dim,
                    (base + dst) * dim,
                );
            }
        }
        self.len = base + keep.len();
        Ok(())
    }
}
