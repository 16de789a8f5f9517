//! Attention over a KV head's rows widened to f32 once ([`Kernels::widens_kv`]): the widening,
//! and the scores and weighted sums that read widened rows, through slot indices or (a chunk of
//! the cache that every pair sees whole) one row after another.

use std::borrow::Cow;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use super::simd128;
#[cfg(target_arch = "x86_64")]
use super::x86;
use super::{scalar, F16Rows, F32Rows, Isa, Kernels};

/// Slots `0..count`, the slots of a chunk read row after row: borrowed for a chunk of
/// attention's size or less, so that no chunk allocates them.
fn first(count: usize) -> Cow<'static, [usize]> {
    const FIRST: [usize; 64] = {
        let mut slots = [0; 64];
        let mut i = 0;
        while i < 64 {
            slots[i] = i;
            i += 1;
        }
        slots
    };
    match FIRST.get(..count) {
        Some(slots) => Cow::Borrowed(slots),
        None => Cow::Owned((0..count).collect()),
    }
}

/// Most (token, head) pairs one pass of the AVX-512 attention kernels takes, each key and
/// value loaded (or converted, [`Kernels::reads_kv_direct`]) once for all of them: three pairs'
/// accumulators (eight 512-bit registers each for the scores) fill the 32 registers. (A unit of
/// attention reads the f16 cache directly in at most two passes, `MOST_DIRECT_PASSES` in
/// `attention.rs`: each pass converts the keys and values again, and three are slower than
/// one widened copy.)
pub const PAIRS_A_PASS: usize = 3;

impl Kernels {
    /// Whether attention widens a KV head's rows to f32 once for all the (token, head) pairs
    /// that read them ([`Kernels::widen`], [`Kernels::scores_f32`]): the x86 kernels, whose f16
    /// loads convert at every read, and wasm's simd128, which has no f16 conversion instruction
    /// (a dozen integer operations a value), where a block's pairs read each row many times (3
    /// query heads a KV head in SmolLM2, 7 in Qwen2.5-0.5B, times the block's tokens).
    pub fn widens_kv(self) -> bool {
        matches!(self.isa, Isa::Avx2 | Isa::Avx512 | Isa::Simd128)
    }

    /// Rows `0..count` of `rows`, widened to f32 one after another into `out` (`[count, len]`).
    /// (`out`'s earlier contents are overwritten, never read: a buffer reused from one head to
    /// the next is not cleared first.)
    pub fn widen(self, rows: F16Rows, count: usize, out: &mut Vec<f32>) {
        out.resize(count * rows.len, 0.0);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: an x86 ISA is only chosen where the CPU has it (here and below).
            Isa::Avx2 => unsafe { x86::widen(rows, count, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 => unsafe { x86::widen_avx512(rows, count, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::widen(rows, count, out),
            _ => {
                for (s, dst) in out.chunks_exact_mut(rows.len.max(1)).enumerate() {
                    for (d, v) in dst.iter_mut().zip(rows.row(s)) {
                        *d = v.to_f32();
                    }
                }
            }
        }
    }

    /// [`Kernels::scores`] over widened rows (the same bits).
    pub fn scores_f32(
        self,
        q: &[f32],
        k: F32Rows,
        slots: &[usize],
        scale: f32,
        out: &mut Vec<f32>,
    ) {
        debug_assert_eq!(q.len(), k.len);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::scores(q, k, slots, scale, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::scores(q, k, slots, scale, out),
            _ => scalar::scores(q, k, slots, scale, out),
        }
    }

    /// [`Kernels::weighted_sum`] over widened rows (the same bits).
    pub fn weighted_sum_f32(self, v: F32Rows, slots: &[usize], p: &[f32], out: &mut [f32]) {
        debug_assert_eq!(out.len(), v.len);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::weighted_sum(v, slots, p, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::weighted_sum(v, slots, p, out),
            _ => scalar::weighted_sum(v, slots, p, out),
        }
    }

    /// [`Kernels::scores_f32`] over rows `0..count` of `len` values one after another (`k`:
    /// `[count, len]`): the same bits as through the slots `0..count`.
    pub fn scores_f32_dense(
        self,
        q: &[f32],
        k: &[f32],
        count: usize,
        scale: f32,
        out: &mut Vec<f32>,
    ) {
        let len = q.len();
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 | Isa::Avx512 => unsafe { x86::scores_dense(q, k, (count, len), scale, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::scores(q, F32Rows::dense(k, len), &first(count), scale, out),
            _ => scalar::scores(q, F32Rows::dense(k, len), &first(count), scale, out),
        }
    }

    /// Whether [`Kernels::widen_keys`] lays `count` keys of `len` values out in slot pairs
    /// (AVX-512: two slots to a register, see `x86::key_pairs`) rather than one after another.
    #[cfg(target_arch = "x86_64")]
    fn keys_in_pairs(self, count: usize, len: usize) -> bool {
        self.isa == Isa::Avx512
            && len > 0
            && len.is_multiple_of(8)
            && count.is_multiple_of(x86::GROUP_SLOTS)
    }

    /// Rows `0..count` of `rows` widened to f32 into `out` in the layout
    /// [`Kernels::scores_keys`] reads: one after another as [`Kernels::widen`] writes them,
    /// or in slot pairs where this instruction set scores two slots to a register.
    pub fn widen_keys(self, rows: F16Rows, count: usize, out: &mut Vec<f32>) {
        #[cfg(target_arch = "x86_64")]
        if self.keys_in_pairs(count, rows.len) {
            out.resize(count * rows.len, 0.0);
            // SAFETY: pairs only where the CPU has AVX-512 F and VL (`keys_in_pairs`), AVX2 with it.
            return unsafe { x86::widen_key_pairs(rows, count, out) };
        }
        self.widen(rows, count, out)
    }

    /// [`Kernels::scores_f32_dense`] over `count` keys as [`Kernels::widen_keys`] wrote them:
    /// the same bits.
    pub fn scores_keys(
        self,
        q: &[f32],
        keys: &[f32],
        count: usize,
        scale: f32,
        out: &mut Vec<f32>,
    ) {
        #[cfg(target_arch = "x86_64")]
        if self.keys_in_pairs(count, q.len()) {
            out.clear();
            // SAFETY: as above.
            return unsafe { x86::scores_key_pairs([q], keys, count, scale, [out]) };
        }
        self.scores_f32_dense(q, keys, count, scale, out)
    }

    /// [`Kernels::scores_keys`] of each query `q[j]`, appended to `out[j]` (`scratch`: a
    /// buffer for instruction sets that score one query at a time). With AVX-512, up to
    /// [`PAIRS_A_PASS`] queries at a time share each key's loads.
    pub fn scores_keys_many(
        self,
        q: &[&[f32]],
        keys: &[f32],
        count: usize,
        scale: f32,
        out: &mut [Vec<f32>],
        scratch: &mut Vec<f32>,
    ) {
        assert_eq!(q.len(), out.len(), "a row of scores for each query");
        #[cfg(target_arch = "x86_64")]
        if q.iter().all(|q| self.keys_in_pairs(count, q.len()))
            && q.windows(2).all(|w| w[0].len() == w[1].len())
        {
            for (q, out) in q.chunks(PAIRS_A_PASS).zip(out.chunks_mut(PAIRS_A_PASS)) {
                // SAFETY: as above.
                unsafe {
                    match (q, out) {
                        ([a], [oa]) => x86::scores_key_pairs([*a], keys, count, scale, [oa]),
                        ([a, b], [oa, ob]) => {
                            x86::scores_key_pairs([*a, *b], keys, count, scale, [oa, ob])
                        }
                        ([a, b, c], [oa, ob, oc]) => {
                            x86::scores_key_pairs([*a, *b, *c], keys, count, scale, [oa, ob, oc])
                        }
                        _ => unreachable!("chunks of one to three"),
                    }
                }
            }
            return;
        }
        for (q, out) in q.iter().zip(out) {
            self.scores_keys(q, keys, count, scale, scratch);
            out.extend_from_slice(scratch);
        }
    }

    /// [`Kernels::weighted_sum_f32`] over rows `0..p.len()` of `out.len()` values one after
    /// another (`v`: `[p.len(), out.len()]`): the same bits as through the slots `0..p.len()`.
    pub fn weighted_sum_f32_dense(self, v: &[f32], p: &[f32], out: &mut [f32]) {
        let len = out.len();
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::weighted_sum_dense(v, len, p, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx512 => unsafe { x86::weighted_sum_dense_avx512(v, len, p, out) },
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Isa::Simd128 => simd128::weighted_sum(F32Rows::dense(v, len), &first(p.len()), p, out),
            _ => scalar::weighted_sum(F32Rows::dense(v, len), &first(p.len()), p, out),
        }
    }

    /// [`Kernels::weighted_sum_f32_dense`] for each pair `j`: `out[j]` from the weights
    /// `p[j]` (every `p[j]` as long, every `out[j]` too). With AVX-512 and outputs of whole
    /// 64s, up to [`PAIRS_A_PASS`] pairs at a time share each row's loads.
    pub fn weighted_sums_f32_dense(self, v: &[f32], p: &[&[f32]], out: &mut [&mut [f32]]) {
        assert_eq!(p.len(), out.len(), "an output for each pair's weights");
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx512
            && out
                .iter()
                .all(|o| o.len() == out[0].len() && o.len().is_multiple_of(64))
            && p.windows(2).all(|w| w[0].len() == w[1].len())
        {
            let len = out.first().map_or(0, |o| o.len());
            for (p, out) in p.chunks(PAIRS_A_PASS).zip(out.chunks_mut(PAIRS_A_PASS)) {
                // SAFETY: as above.
                unsafe {
                    match (p, out) {
                        ([a], [oa]) => x86::weighted_sums_dense_avx512(v, len, [*a], [&mut **oa]),
                        ([a, b], [oa, ob]) => x86::weighted_sums_dense_avx512(
                            v,
                            len,
                            [*a, *b],
                            [&mut **oa, &mut **ob],
                        ),
                        ([a, b, c], [oa, ob, oc]) => x86::weighted_sums_dense_avx512(
                            v,
                            len,
                            [*a, *b, *c],
                            [&mut **oa, &mut **ob, &mut **oc],
                        ),
                        _ => unreachable!("chunks of one to three"),
                    }
                }
            }
            return;
        }
        for (p, out) in p.iter().zip(out) {
            self.weighted_sum_f32_dense(v, p, out);
        }
    }

    /// Whether [`Kernels::scores_f16`] and [`Kernels::weighted_sums_f16`] read `pairs` pairs'
    /// keys and values of `len` values straight from the cache, `count` slots at a time (AVX-512,
    /// at most three pairs, heads of whole 64s, slots in whole sixteens), where attention would
    /// otherwise widen them into a buffer first: what a decoding step's few query heads to a KV
    /// head read fastest.
    pub fn reads_kv_direct(self, pairs: usize, len: usize, count: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx512 {
            return (1..=PAIRS_A_PASS).contains(&pairs)
                && len > 0
                && len.is_multiple_of(64)
                && count.is_multiple_of(x86::GROUP_SLOTS);
        }
        let _ = (pairs, len, count);
        false
    }

    /// The scores of each query `q[j]` against rows `0..count` of `rows`, appended to `out[j]`:
    /// the bits of [`Kernels::scores`] over slots `0..count`. Only where
    /// [`Kernels::reads_kv_direct`] (else each query through [`Kernels::scores`]).
    pub fn scores_f16(
        self,
        q: &[&[f32]],
        rows: F16Rows,
        count: usize,
        scale: f32,
        out: &mut [Vec<f32>],
    ) {
        assert_eq!(q.len(), out.len(), "a row of scores for each query");
        #[cfg(target_arch = "x86_64")]
        if self.reads_kv_direct(q.len(), rows.len, count) {
            // SAFETY: AVX-512 F and VL (`reads_kv_direct`), AVX2 with it.
            unsafe {
                match (q, out) {
                    ([a], [oa]) => x86::scores_f16_pairs([*a], rows, count, scale, [oa]),
                    ([a, b], [oa, ob]) => {
                        x86::scores_f16_pairs([*a, *b], rows, count, scale, [oa, ob])
                    }
                    ([a, b, c], [oa, ob, oc]) => {
                        x86::scores_f16_pairs([*a, *b, *c], rows, count, scale, [oa, ob, oc])
                    }
                    _ => unreachable!("one to three pairs (`reads_kv_direct`)"),
                }
            }
            return;
        }
        let (slots, mut scores) = (first(count), Vec::new());
        for (q, out) in q.iter().zip(out) {
            self.scores(q, rows, &slots, scale, &mut scores);
            out.extend_from_slice(&scores);
        }
    }

    /// `out[j][e] += p[j][s] * rows.row(s)[e]`, slot after slot, for each pair `j` (every
    /// `p[j]` as long): the bits of [`Kernels::weighted_sum`] over slots `0..p[j].len()`.
    pub fn weighted_sums_f16(self, rows: F16Rows, p: &[&[f32]], out: &mut [&mut [f32]]) {
        assert_eq!(p.len(), out.len(), "an output for each pair's weights");
        #[cfg(target_arch = "x86_64")]
        if self.reads_kv_direct(p.len(), rows.len, p.first().map_or(0, |p| p.len()))
            && p.windows(2).all(|w| w[0].len() == w[1].len())
        {
            // SAFETY: as above.
            unsafe {
                match (p, out) {
                    ([a], [oa]) => x86::weighted_sums_f16(rows, [*a], [&mut **oa]),
                    ([a, b], [oa, ob]) => {
                        x86::weighted_sums_f16(rows, [*a, *b], [&mut **oa, &mut **ob])
                    }
                    ([a, b, c], [oa, ob, oc]) => x86::weighted_sums_f16(
                        rows,
                        [*a, *b, *c],
                        [&mut **oa, &mut **ob, &mut **oc],
                    ),
                    _ => unreachable!("one to three pairs (`reads_kv_direct`)"),
                }
            }
            return;
        }
        for (p, out) in p.iter().zip(out) {
            self.weighted_sum(rows, &first(p.len()), p, out);
        }
    }
}
