//! The KV cache in f16 (as llama.cpp's default cache and the GPU engine keep it).

use half::f16;
use half::slice::HalfFloatSliceExt;
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
        // The slice conversion rounds as `f16::from_f32` does (to nearest, ties to even), with
        // F16C several at a time where the CPU has it, not a call per value.
        self.k[layer][slots.clone()].convert_from_f32_slice(k);
        self.v[layer][slots].convert_from_f32_slice(v);
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
        let mut cache = KvCache::new(1, 8, kv_dim);
        cache.reserve(5);
        let v: Vec<f32> = values.iter().map(|x| -x).collect();
        cache.write(0, 2, &values, &v);
        for (i, (&x, &y)) in values.iter().zip(&v).enumerate() {
            let at = 2 * kv_dim + i;
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
}
