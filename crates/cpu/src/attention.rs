//! Attention of each block token over the cache and its visible block entries, in the
//! reference's order (slots ascending; scores, softmax, then values accumulated slot by slot),
//! reading the f16 cache. Threads split the (token, head) pairs.

use std::sync::Mutex;

use half::f16;

use crate::kernels::{F16Rows, Kernels};
use crate::ops::softmax;
use crate::pool::Team;

/// One layer's attention problem.
pub struct Attention<'a> {
    pub kernels: Kernels,
    pub q: &'a [f32],        // [n, n_heads * head_dim], after RoPE
    pub k: &'a [f16],        // [slots, kv_dim]: the layer's cache, block entries included
    pub v: &'a [f16],        // [slots, kv_dim]
    pub visible: &'a [bool], // [n, n]: block token i sees block token j
    pub base: usize,         // cache entries before the block
    pub n: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
}

impl Attention<'_> {
    /// `[n, n_heads * head_dim]`.
    pub fn run(&self, team: &Team) -> Vec<f32> {
        let hd = self.head_dim;
        let mut out = vec![0f32; self.n * self.n_heads * hd];
        let queue = Mutex::new(out.chunks_mut(hd).enumerate());
        team.run(&|| {
            let mut scratch = Scratch::default();
            loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((pair, o)) = next else { break };
                self.head(pair / self.n_heads, pair % self.n_heads, o, &mut scratch);
            }
        });
        out
    }

    /// Head `h` of block token `i` into `out` (`[head_dim]`, zeroed).
    fn head(&self, i: usize, h: usize, out: &mut [f32], s: &mut Scratch) {
        let (hd, n) = (self.head_dim, self.n);
        let kv_dim = self.n_kv_heads * hd;
        let kvh = h / (self.n_heads / self.n_kv_heads);
        let scale = 1.0 / (hd as f32).sqrt();
        let qh = &self.q[(i * self.n_heads + h) * hd..][..hd];
        s.slots.clear();
        s.slots.extend(0..self.base);
        s.slots.extend(
            (0..n)
                .filter(|&j| self.visible[i * n + j])
                .map(|j| self.base + j),
        );
        let rows = |data| F16Rows {
            data,
            stride: kv_dim,
            offset: kvh * hd,
            len: hd,
        };
        let k = self.kernels;
        k.scores(qh, rows(self.k), &s.slots, scale, &mut s.scores);
        softmax(&mut s.scores);
        k.weighted_sum(rows(self.v), &s.slots, &s.scores, out);
    }
}

/// Per-thread buffers.
#[derive(Default)]
struct Scratch {
    slots: Vec<usize>,
    scores: Vec<f32>,
}
