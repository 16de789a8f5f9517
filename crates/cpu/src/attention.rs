//! Attention of each block token over the cache and its visible block entries, in the
//! reference's order (slots ascending; scores, softmax, then values accumulated slot by slot),
//! reading the f16 cache. Threads split the (token, head) pairs.

use std::sync::Mutex;

use half::f16;

use crate::kernels::{F16Rows, F32Rows, Kernels};
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

/// A unit of work: (token, head) pairs of one KV head, each with its output (`[head_dim]`).
type Pairs<'o> = Vec<(usize, &'o mut [f32])>;

impl Attention<'_> {
    /// `[n, n_heads * head_dim]`.
    pub fn run(&self, team: &Team) -> Vec<f32> {
        let hd = self.head_dim;
        let mut out = vec![0f32; self.n * self.n_heads * hd];
        let group = self.n_heads / self.n_kv_heads;
        if self.kernels.widens_kv() && self.n * group > 1 {
            let units = Mutex::new(self.units(&mut out, team.threads()).into_iter());
            team.run(&|| {
                let mut scratch = Scratch::default();
                loop {
                    let next = units.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((kvh, pairs)) = next else { break };
                    self.widened(kvh, pairs, &mut scratch);
                }
            });
            return out;
        }
        let queue = Mutex::new(out.chunks_mut(hd).enumerate());
        team.run(&|| {
            let mut scratch = Scratch::default();
            loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((pair, o)) = next else { break };
                let (i, h) = (pair / self.n_heads, pair % self.n_heads);
                let (k, v) = (self.rows(self.k, h), self.rows(self.v, h));
                let kernels = self.kernels;
                self.head(i, h, &mut scratch, |q, slots, scale, scores| {
                    kernels.scores(q, k, slots, scale, scores)
                });
                kernels.weighted_sum(v, &scratch.slots, &scratch.scores, o);
            }
        });
        out
    }

    /// The pairs by KV head, each KV head's in as many units as keep every thread busy (each
    /// unit widens its KV head's rows once: one unit a KV head on one thread).
    fn units<'o>(&self, out: &'o mut [f32], threads: usize) -> Vec<(usize, Pairs<'o>)> {
        let group = self.n_heads / self.n_kv_heads;
        let per_kv = self.n * group;
        let units_per_kv = (2 * threads).div_ceil(self.n_kv_heads).clamp(1, per_kv);
        let chunk = per_kv.div_ceil(units_per_kv);
        let mut by_kv: Vec<Pairs> = (0..self.n_kv_heads).map(|_| Vec::new()).collect();
        for (pair, o) in out.chunks_mut(self.head_dim).enumerate() {
            by_kv[pair % self.n_heads / group].push((pair, o));
        }
        let mut units = Vec::new();
        for (kvh, mut pairs) in by_kv.into_iter().enumerate() {
            while !pairs.is_empty() {
                let rest = pairs.split_off(chunk.min(pairs.len()));
                units.push((kvh, pairs));
                pairs = rest;
            }
        }
        units
    }

    /// KV head `kvh`'s rows as the cache holds them.
    fn rows<'c>(&self, data: &'c [f16], h: usize) -> F16Rows<'c> {
        let hd = self.head_dim;
        F16Rows {
            data,
            stride: self.n_kv_heads * hd,
            offset: h / (self.n_heads / self.n_kv_heads) * hd,
            len: hd,
        }
    }

    /// `pairs` of KV head `kvh`, over its rows widened to f32 once for all of them.
    fn widened(&self, kvh: usize, pairs: Pairs, s: &mut Scratch) {
        let (hd, kernels) = (self.head_dim, self.kernels);
        let slots = self.base + self.n;
        let h = kvh * (self.n_heads / self.n_kv_heads);
        kernels.widen(self.rows(self.k, h), slots, &mut s.k);
        kernels.widen(self.rows(self.v, h), slots, &mut s.v);
        let (k, v) = (std::mem::take(&mut s.k), std::mem::take(&mut s.v));
        let widened = |data| F32Rows {
            data,
            stride: hd,
            offset: 0,
            len: hd,
        };
        for (pair, o) in pairs {
            let (i, h) = (pair / self.n_heads, pair % self.n_heads);
            self.head(i, h, s, |q, slots, scale, scores| {
                kernels.scores_f32(q, widened(&k), slots, scale, scores)
            });
            kernels.weighted_sum_f32(widened(&v), &s.slots, &s.scores, o);
        }
        (s.k, s.v) = (k, v);
    }

    /// Head `h` of block token `i`: its visible slots into `s.slots` and their softmaxed
    /// scores (from `scores(q, slots, scale, out)`) into `s.scores`.
    fn head(
        &self,
        i: usize,
        h: usize,
        s: &mut Scratch,
        scores: impl Fn(&[f32], &[usize], f32, &mut Vec<f32>),
    ) {
        let (hd, n) = (self.head_dim, self.n);
        let scale = 1.0 / (hd as f32).sqrt();
        let qh = &self.q[(i * self.n_heads + h) * hd..][..hd];
        s.slots.clear();
        s.slots.extend(0..self.base);
        s.slots.extend(
            (0..n)
                .filter(|&j| self.visible[i * n + j])
                .map(|j| self.base + j),
        );
        scores(qh, &s.slots, scale, &mut s.scores);
        softmax(&mut s.scores);
    }
}

/// Per-thread buffers.
#[derive(Default)]
struct Scratch {
    slots: Vec<usize>,
    scores: Vec<f32>,
    /// A KV head's keys and values widened to f32 (`[slots, head_dim]`).
    k: Vec<f32>,
    v: Vec<f32>,
}
