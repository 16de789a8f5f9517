//! Attention of each block token over the cache and its visible block entries, in the
//! reference's order (slots ascending; scores, softmax, then values accumulated slot by slot),
//! reading the f16 cache. Threads split the (token, head) pairs.
//!
//! A sliding-window layer's query at position `p` sees only keys at positions `> p - window`
//! (a cached slot's position is its index, a block entry's its batch position): the cache's
//! visible slots are a suffix of it, and the block's visible entries are filtered the same
//! way. Each query's scores are those of its visible slots alone, whatever the block around
//! it, so a token's result is the same in any block. Such a layer's cache may be a ring
//! (index `i` in slot `i % slots`); indices and positions are what the mask compares.

use std::ops::Range;
use std::sync::Mutex;

use half::f16;

use crate::kernels::{F16Rows, F32Rows, Kernels, PAIRS_A_PASS};
use crate::pool::Team;

/// One layer's attention problem.
pub struct Attention<'a> {
    pub kernels: Kernels,
    pub q: &'a [f32],       // [n, n_heads * head_dim], after RoPE
    pub k: &'a [f16], // [kv_heads, slots, head_dim]: the layer's cache, block entries included
    pub v: &'a [f16], // [kv_heads, slots, head_dim]
    pub head_stride: usize, // elements from one KV head's entries to the next's
    /// Slots of each KV head's entries: cache index `i` is in slot `i % slots` (a
    /// sliding-window layer's ring; `slots` is a multiple of [`CHUNK_SLOTS`] once the ring
    /// wraps, so an aligned chunk of indices is a run of slots).
    pub slots: usize,
    pub visible: &'a [bool], // [n, n]: block token i sees block token j
    pub base: usize,         // cache entries before the block
    pub n: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub head_dim: usize,
    pub positions: &'a [usize], // [n]: each block token's position
    /// A query at `p` sees keys at positions `> p - window` only.
    pub window: Option<usize>,
    /// Multiplies `q·k` before the softmax.
    pub scale: f32,
}

/// A unit of work: (token, head) pairs of one KV head, each with its output (`[head_dim]`).
type Pairs<'o> = Vec<(usize, &'o mut [f32])>;

impl Attention<'_> {
    /// `[n, n_heads * head_dim]`; `scratch` holds each thread's buffers from layer to layer.
    pub fn run(&self, team: &Team, scratch: &AttentionScratch) -> Vec<f32> {
        let hd = self.head_dim;
        let mut out = vec![0f32; self.n * self.n_heads * hd];
        let group = self.n_heads / self.n_kv_heads;
        if self.kernels.widens_kv() && self.n * group > 1 {
            let units = Mutex::new(self.units(&mut out, team.threads()).into_iter());
            team.run(&|t| {
                scratch.with(t, |scratch| loop {
                    let next = units.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some((kvh, pairs)) = next else { break };
                    self.widened(kvh, pairs, scratch);
                })
            });
            return out;
        }
        let queue = Mutex::new(out.chunks_mut(hd).enumerate());
        team.run(&|t| {
            scratch.with(t, |scratch| loop {
                let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                let Some((pair, o)) = next else { break };
                let (i, h) = (pair / self.n_heads, pair % self.n_heads);
                let (k, v) = (self.rows(self.k, h), self.rows(self.v, h));
                let kernels = self.kernels;
                self.head(i, h, scratch, |q, slots, scale, scores| {
                    kernels.scores(q, k, slots, scale, scores)
                });
                kernels.weighted_sum(v, &scratch.slots, &scratch.scores, o);
            })
        });
        out
    }

    /// The pairs by KV head in units for the threads. Each unit widens its KV head's rows once,
    /// a pass over that head's cache whatever the unit's share of its pairs (memory-bound at
    /// long contexts), so KV heads stay whole where the threads can share them out evenly, and
    /// only the rest are split, each in as many parts as gives every thread a share (SmolLM2's
    /// three on two threads: two whole and one halved, four passes where halving all three
    /// took six; the Qwen 0.5B's two on two threads: two whole, where it took four).
    fn units<'o>(&self, out: &'o mut [f32], threads: usize) -> Vec<(usize, Pairs<'o>)> {
        let group = self.n_heads / self.n_kv_heads;
        let per_kv = self.n * group;
        let whole = self.n_kv_heads - self.n_kv_heads % threads.max(1);
        let split = self.n_kv_heads - whole;
        let parts = |kvh: usize| {
            if kvh < whole {
                1
            } else {
                threads.div_ceil(split).clamp(1, per_kv)
            }
        };
        let mut by_kv: Vec<Pairs> = (0..self.n_kv_heads).map(|_| Vec::new()).collect();
        for (pair, o) in out.chunks_mut(self.head_dim).enumerate() {
            by_kv[pair % self.n_heads / group].push((pair, o));
        }
        let mut units = Vec::new();
        for (kvh, mut pairs) in by_kv.into_iter().enumerate() {
            let chunk = per_kv.div_ceil(parts(kvh));
            while !pairs.is_empty() {
                let rest = pairs.split_off(chunk.min(pairs.len()));
                units.push((kvh, pairs));
                pairs = rest;
            }
        }
        units
    }

    /// The rows of query head `h`'s KV head as the cache holds them (one after another).
    fn rows<'c>(&self, data: &'c [f16], h: usize) -> F16Rows<'c> {
        F16Rows {
            data,
            stride: self.head_dim,
            offset: h / (self.n_heads / self.n_kv_heads) * self.head_stride,
            len: self.head_dim,
        }
    }

    /// `pairs` of KV head `kvh`, over its rows widened to f32 once for all of them, a chunk of
    /// [`CHUNK_SLOTS`] slots at a time: every pair's scores over a chunk of keys, then (after
    /// the softmax of each pair's whole row) every pair's sum over a chunk of values. Each
    /// score and each output's slot-by-slot sum is computed as over the whole head at once.
    fn widened(&self, kvh: usize, pairs: Pairs, s: &mut Scratch) {
        let (hd, kernels, base) = (self.head_dim, self.kernels, self.base);
        let h = kvh * (self.n_heads / self.n_kv_heads);
        let (k_rows, v_rows) = (self.rows(self.k, h), self.rows(self.v, h));
        let scale = self.scale;
        let Scratch {
            k,
            v,
            scores,
            block_slots,
            pair_scores,
            rel,
            first,
            ..
        } = s;
        // Grown, never shrunk: units of different sizes (a KV head whole, then half of one)
        // dropped and allocated the rows' buffers again, and their scores grew anew.
        if block_slots.len() < pairs.len() {
            block_slots.resize_with(pairs.len(), Vec::new);
            pair_scores.resize_with(pairs.len(), Vec::new);
        }
        first.clear();
        for (p, (pair, _)) in pairs.iter().enumerate() {
            let i = pair / self.n_heads;
            block_slots[p].clear();
            block_slots[p].extend(self.visible_block(i));
            pair_scores[p].clear();
            first.push(self.first_cached(i));
        }
        let first = &*first;
        // Every pair sees the cache's slots from `all_see` on; none sees those before `seen`.
        let all_see = first.iter().copied().max().unwrap_or(0);
        let seen = first.iter().copied().min().unwrap_or(0);
        // Pair `p`'s visible slots in chunk `c`, relative to its start (the cache's from
        // `first[p]` on: a chunk of them is the identity), and how many come before the chunk.
        let in_chunk = |p: usize, c: &Range<usize>, rel: &mut Vec<usize>| -> usize {
            let block = &block_slots[p]; // relative to `base`
            let (from_j, end) = (c.start.saturating_sub(base), c.end.saturating_sub(base));
            let (from, to) = (
                block.partition_point(|&j| j < from_j),
                block.partition_point(|&j| j < end),
            );
            rel.clear();
            rel.extend((c.start.max(first[p])..c.end.min(base)).map(|slot| slot - c.start));
            rel.extend(block[from..to].iter().map(|&j| base + j - c.start));
            c.start.min(base).saturating_sub(first[p]) + from
        };
        // The chunks from the one holding the first slot any pair sees (the same chunks as
        // from slot 0: their bounds do not move).
        let chunks = (seen - seen % CHUNK_SLOTS..base + self.n)
            .step_by(CHUNK_SLOTS)
            .map(|c0| c0..(base + self.n).min(c0 + CHUNK_SLOTS));
        // A chunk of the cache every pair sees whole.
        let whole = |c: &Range<usize>| c.end <= base && c.start >= all_see;
        // A chunk seen whole that a few pairs read straight from the f16 rows, each key and
        // value converted once in registers for the pairs of a pass; more pairs share a
        // widened copy.
        let n_pairs = pairs.len();
        let direct = |c: &Range<usize>| {
            whole(c)
                && n_pairs <= MOST_DIRECT_PASSES * PAIRS_A_PASS
                && kernels.reads_kv_direct(n_pairs.min(PAIRS_A_PASS), hd, c.len())
        };
        for c in chunks.clone() {
            if direct(&c) {
                let rows = k_rows.from_slot(c.start % self.slots);
                self.score_passes(&pairs, pair_scores, |qs, out| {
                    kernels.scores_f16(qs, rows, c.len(), scale, out)
                });
                continue;
            }
            // Every slot of the chunk is visible to every pair: its keys in the kernels' own
            // layout, all scored, a few pairs a pass. A chunk with block entries, or with
            // slots out of a pair's window, is read through each pair's visible slots.
            if whole(&c) {
                kernels.widen_keys(k_rows.from_slot(c.start % self.slots), c.len(), k);
                self.score_passes(&pairs, pair_scores, |qs, out| {
                    kernels.scores_keys_many(qs, k, c.len(), scale, out, scores)
                });
                continue;
            }
            kernels.widen(k_rows.from_slot(c.start % self.slots), c.len(), k);
            let keys = F32Rows::dense(k, hd);
            for (p, &(pair, _)) in pairs.iter().enumerate() {
                let qh = &self.q[pair * hd..][..hd];
                in_chunk(p, &c, rel);
                kernels.scores_f32(qh, keys, rel, scale, scores);
                pair_scores[p].extend_from_slice(scores);
            }
        }
        kernels.softmax_rows(&mut pair_scores[..pairs.len()]);
        let mut pairs = pairs;
        for c in chunks {
            if direct(&c) {
                let rows = v_rows.from_slot(c.start % self.slots);
                sum_passes(&mut pairs, pair_scores, first, &c, |weights, outs| {
                    kernels.weighted_sums_f16(rows, weights, outs)
                });
                continue;
            }
            kernels.widen(v_rows.from_slot(c.start % self.slots), c.len(), v);
            if whole(&c) {
                sum_passes(&mut pairs, pair_scores, first, &c, |weights, outs| {
                    kernels.weighted_sums_f32_dense(v, weights, outs)
                });
                continue;
            }
            let values = F32Rows::dense(v, hd);
            for (p, (_, o)) in pairs.iter_mut().enumerate() {
                let before = in_chunk(p, &c, rel);
                let weights = &pair_scores[p][before..before + rel.len()];
                kernels.weighted_sum_f32(values, rel, weights, o);
            }
        }
    }

    /// `scores(queries, their score rows)` for `pairs`, [`PAIRS_A_PASS`] at a time.
    fn score_passes(
        &self,
        pairs: &Pairs,
        pair_scores: &mut [Vec<f32>],
        mut scores: impl FnMut(&[&[f32]], &mut [Vec<f32>]),
    ) {
        let hd = self.head_dim;
        for (at, group) in pairs.chunks(PAIRS_A_PASS).enumerate() {
            let mut qs: [&[f32]; PAIRS_A_PASS] = Default::default();
            for (q, &(pair, _)) in qs.iter_mut().zip(group) {
                *q = &self.q[pair * hd..][..hd];
            }
            let n = group.len();
            scores(&qs[..n], &mut pair_scores[at * PAIRS_A_PASS..][..n]);
        }
    }

    /// The block entries block token `i` sees (`j`: slot `base + j`), ascending: those its
    /// mask lets it see, within its window.
    fn visible_block(&self, i: usize) -> impl Iterator<Item = usize> + '_ {
        let pos = self.positions[i];
        (0..self.n).filter(move |&j| {
            self.visible[i * self.n + j] && self.window.is_none_or(|w| pos < self.positions[j] + w)
        })
    }

    /// The first cached slot block token `i` sees: 0, or the first within its window (a
    /// cached slot's position is its index).
    fn first_cached(&self, i: usize) -> usize {
        let pos = self.positions[i];
        self.window
            .map_or(0, |w| (pos + 1).saturating_sub(w))
            .min(self.base)
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
        let hd = self.head_dim;
        let qh = &self.q[(i * self.n_heads + h) * hd..][..hd];
        s.slots.clear();
        let slot = |index: usize| index % self.slots;
        s.slots.extend((self.first_cached(i)..self.base).map(slot));
        s.slots
            .extend(self.visible_block(i).map(|j| slot(self.base + j)));
        scores(qh, &s.slots, self.scale, &mut s.scores);
        self.kernels.softmax(&mut s.scores);
    }
}

/// `sums(weights, outputs)` for `pairs`, [`PAIRS_A_PASS`] at a time: each pair's softmaxed
/// scores over chunk `c` of the cache, which it sees whole (`pair_scores`, from its first
/// visible slot `first` on), and its output.
fn sum_passes(
    pairs: &mut Pairs,
    pair_scores: &[Vec<f32>],
    first: &[usize],
    c: &Range<usize>,
    mut sums: impl FnMut(&[&[f32]], &mut [&mut [f32]]),
) {
    for (at, group) in pairs.chunks_mut(PAIRS_A_PASS).enumerate() {
        let n = group.len();
        let mut weights: [&[f32]; PAIRS_A_PASS] = Default::default();
        let firsts = &first[at * PAIRS_A_PASS..][..n];
        for ((w, scores), &f) in weights
            .iter_mut()
            .zip(&pair_scores[at * PAIRS_A_PASS..][..n])
            .zip(firsts)
        {
            *w = &scores[c.start - f..c.end - f];
        }
        let mut outs: [&mut [f32]; PAIRS_A_PASS] = Default::default();
        for (out, (_, o)) in outs.iter_mut().zip(group.iter_mut()) {
            *out = &mut **o;
        }
        sums(&weights[..n], &mut outs[..n]);
    }
}

/// Each thread's [`Scratch`], kept from layer to layer and forward to forward (made afresh
/// per layer, the per-pair scores grew by reallocation through every chunk: 4% of a
/// speculative run's samples were the allocator's).
#[derive(Default)]
pub struct AttentionScratch {
    per_thread: Vec<Mutex<Scratch>>,
}

impl AttentionScratch {
    pub fn for_threads(threads: usize) -> Self {
        AttentionScratch {
            per_thread: (0..threads).map(|_| Mutex::default()).collect(),
        }
    }

    /// `f` with thread `t`'s buffers (fresh ones for a thread past those it was made for).
    fn with(&self, t: usize, f: impl FnOnce(&mut Scratch)) {
        match self.per_thread.get(t) {
            Some(s) => f(&mut s.lock().unwrap_or_else(|e| e.into_inner())),
            None => f(&mut Scratch::default()),
        }
    }
}

/// Per-thread buffers.
#[derive(Default)]
struct Scratch {
    slots: Vec<usize>,
    scores: Vec<f32>,
    /// A chunk of a KV head's keys and values widened to f32 (`[CHUNK_SLOTS, head_dim]`).
    k: Vec<f32>,
    v: Vec<f32>,
    /// The widened path's: each pair's visible block entries (relative to the cache's
    /// length) and scores (the unit's pairs the first entries, the rest a larger unit's,
    /// stale), and a chunk's visible slots relative to its first (a chunk of the cache alone,
    /// all visible, is read row after row instead).
    block_slots: Vec<Vec<usize>>,
    pair_scores: Vec<Vec<f32>>,
    rel: Vec<usize>,
    /// Each pair's first visible cached slot (past the slots out of its window).
    first: Vec<usize>,
}

/// Passes over a chunk of the f16 cache a unit of pairs makes before it widens the chunk once
/// instead: two (six pairs, two of SmolLM2's rows, or a halved unit of four) read it faster
/// than a widened copy (two rows behind 1,024 entries 3-9% faster), three (the Qwen 0.5B's
/// seven query heads to a KV head) slower (one row 12%).
const MOST_DIRECT_PASSES: usize = 2;

/// Slots a chunk of widened keys and values holds: 64 rows of 64 f32 are 16 KB, which stay in
/// the L1 cache while every pair of a unit reads them; a whole KV head widened at once (512 KB
/// of keys and values behind 1,024 entries) went out to the outer caches and back for each pair.
const CHUNK_SLOTS: usize = 64;
