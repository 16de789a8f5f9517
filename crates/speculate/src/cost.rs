//! The target's verification cost: seconds of one forward over a block of `rows` new rows
//! behind `context` cached entries.
//!
//! Two things set it. The weights are read once per forward whatever the rows (so on a GPU a
//! few more rows are nearly free), and attention reads the whole cache once per row (so the
//! extra rows grow dearer as the context grows). A model calibrated behind a short context
//! alone underestimates verification behind a long prompt, where a wrong draft costs most. So
//! every block size is timed at two context lengths, and the cost in between and beyond is
//! linear in the context, as attention is: [`calibrate`] times them behind a short context when
//! the model loads, and [`calibrate_far`] behind the first long context a generation reaches,
//! behind the tokens already in the cache (a prefill of its own would cost more than all the
//! timing on a slow device).

use runahead_model::{Batch, LanguageModel, ModelError};
use web_time::Instant;

use crate::limits::MAX_DRAFT;

/// Block sizes `1..=BLOCKS` (a step verifies up to `MAX_DRAFT` nodes after the last token).
const BLOCKS: usize = MAX_DRAFT + 1;

/// One value per block size: `[rows - 1]`.
type PerBlock = [f64; BLOCKS];

/// Modeled cost of the block sizes `1..=BLOCKS`, with online corrections.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// Seconds behind `near` cached entries.
    near_seconds: PerBlock,
    near: usize,
    /// Seconds each further cached entry adds.
    per_entry: PerBlock,
    /// Online: measured over modeled time across all forwards (the device's state now:
    /// thermal throttling, a busy tab).
    drift: f64,
    /// Online: what remains of that ratio after `drift`, at the timed block sizes
    /// ([`TIMED_ROWS`]) and linear between them, behind `near` and [`FAR_CORRECTION`] entries
    /// and linear in the context between them. Per size, the sizes a generation happens not
    /// to verify kept their calibrated cost times the whole drift while the ones it verifies
    /// were corrected, and the curve went up and down (three rows dearer than four): a size
    /// priced too high is never tried, so it never came back down. Per context, because the
    /// line through the two calibrations is steeper than the cost where the second was taken
    /// behind a few hundred entries and extrapolated (SmolLM2 on two threads: four rows behind
    /// 768-1,023 entries priced 20% above what they took, one row 8%), which one factor per
    /// size cannot undo.
    correction: [[f64; TIMED_ROWS.len()]; 2],
    /// Calibrated behind `near` entries and waiting for a second, long context.
    far_pending: bool,
}

/// The cost of every block size at one context length (a copy per decoding step, no
/// allocation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostCurve {
    /// Non-decreasing.
    seconds: PerBlock,
}

impl CostCurve {
    pub fn flat() -> Self {
        CostCurve {
            seconds: [1.0; BLOCKS],
        }
    }

    pub fn seconds(&self, rows: usize) -> f64 {
        self.seconds[rows.clamp(1, BLOCKS) - 1]
    }

    /// Cost relative to one row, for reports.
    pub fn ratios(&self) -> Vec<f64> {
        self.seconds.iter().map(|s| s / self.seconds[0]).collect()
    }
}

impl CostModel {
    fn new(near_seconds: PerBlock, near: usize, per_entry: PerBlock) -> Self {
        CostModel {
            near_seconds,
            near,
            per_entry,
            drift: 1.0,
            correction: [[1.0; TIMED_ROWS.len()]; 2],
            far_pending: false,
        }
    }

    fn context_free(near_seconds: PerBlock) -> Self {
        Self::new(near_seconds, 0, [0.0; BLOCKS])
    }

    /// Every block size costs the same at every context (an idealized wide GPU).
    pub fn flat() -> Self {
        Self::context_free([1.0; BLOCKS])
    }

    /// Cost growing linearly with the rows, `1 + per_row * (rows - 1)` (relative units), at
    /// every context.
    pub fn linear(per_row: f64) -> Self {
        Self::context_free(std::array::from_fn(|r| 1.0 + per_row * r as f64))
    }

    /// This model with every row past the first priced at `scale` times its cost, at every
    /// context (a what-if: what cheaper verification would buy, for the replay).
    pub fn with_extra_rows_scaled(&self, scale: f64) -> Self {
        let scaled =
            |v: &PerBlock| -> PerBlock { std::array::from_fn(|i| v[0] + scale * (v[i] - v[0])) };
        CostModel {
            near_seconds: scaled(&self.near_seconds),
            per_entry: scaled(&self.per_entry),
            ..self.clone()
        }
    }

    /// From `(rows, seconds)` measured at one context, used at every context.
    pub fn from_samples(samples: &[(usize, f64)]) -> Self {
        match interpolate(samples) {
            Some(seconds) => Self::context_free(seconds),
            None => Self::flat(),
        }
    }

    /// From `(rows, seconds)` measured behind `near` and behind `far` cached entries
    /// (`far > near`); linear in the context between and beyond them.
    pub fn from_two_contexts(
        near: usize,
        near_samples: &[(usize, f64)],
        far: usize,
        far_samples: &[(usize, f64)],
    ) -> Self {
        let Some(near_seconds) = interpolate(near_samples) else {
            return Self::flat();
        };
        match per_entry(&near_seconds, near, far, far_samples) {
            Some(per_entry) => Self::new(near_seconds, near, per_entry),
            None => Self::context_free(near_seconds),
        }
    }

    /// Whether [`calibrate_far`] should time the blocks behind `context` entries: the model
    /// was calibrated behind a short context only, and `context` is long enough for the
    /// difference to show over timing noise.
    pub fn wants_far(&self, context: usize) -> bool {
        self.far_pending && context >= FAR_CONTEXT_MIN.max(4 * self.near)
    }

    /// Completes the model with `far_samples` measured behind `far` entries (see
    /// [`CostModel::from_two_contexts`]); the online corrections are kept.
    fn add_far(&mut self, far: usize, far_samples: &[(usize, f64)]) {
        if let Some(per_entry) = per_entry(&self.near_seconds, self.near, far, far_samples) {
            self.per_entry = per_entry;
        }
        self.far_pending = false;
    }

    /// Modeled seconds without the online corrections.
    fn modeled(&self, rows: usize, context: usize) -> f64 {
        let i = rows.clamp(1, BLOCKS) - 1;
        let near = self.near_seconds[i];
        let extra = self.per_entry[i] * (context as f64 - self.near as f64);
        // Below the near context the line may fall; the weights' share never goes away.
        (near + extra).max(0.25 * near)
    }

    /// The cost of every block size behind `context` cached entries.
    pub fn at(&self, context: usize) -> CostCurve {
        let mut seconds: PerBlock = std::array::from_fn(|i| {
            self.modeled(i + 1, context) * self.drift * self.correction_at(i + 1, context)
        });
        make_non_decreasing(&mut seconds);
        CostCurve { seconds }
    }

    /// Folds in one measured forward: `drift` follows every forward, `correction` the rest
    /// for this block size (moving averages, so the model follows the device as it changes).
    pub fn observe(&mut self, rows: usize, context: usize, seconds: f64) {
        if !(seconds.is_finite() && seconds > 0.0) || rows == 0 || rows > BLOCKS {
            return;
        }
        let ratio = seconds / self.modeled(rows, context);
        // The common drift moves faster than a size's own residual, so that a change of the
        // device's state reaches the sizes that are not being verified at the moment.
        let corrected = self.correction_at(rows, context);
        self.drift = (0.8 * self.drift + 0.2 * ratio / corrected).clamp(0.1, 10.0);
        // What the corrections miss moves the timed sizes around `rows` at the two contexts
        // around `context`, each by its share (a step of least squares: a context between
        // the two moves both, one behind either moves that one).
        let miss = ratio / self.drift - corrected;
        for (j, at_context) in self.context_shares(context) {
            for (k, share) in knots(rows) {
                let c = &mut self.correction[j][k];
                *c = (*c + 0.1 * at_context * share * miss).clamp(0.1, 10.0);
            }
        }
    }

    /// The online correction of `rows` behind `context` entries: between those of the timed
    /// sizes around it, behind the two contexts around it.
    fn correction_at(&self, rows: usize, context: usize) -> f64 {
        let mut sum = 0.0;
        for (j, at_context) in self.context_shares(context) {
            for (k, share) in knots(rows) {
                sum += at_context * share * self.correction[j][k];
            }
        }
        sum
    }

    /// The corrections' two contexts (`near`, [`FAR_CORRECTION`]) with their linear weights
    /// at `context` (summing to 1; beyond either end, all on that end).
    fn context_shares(&self, context: usize) -> [(usize, f64); 2] {
        let far = FAR_CORRECTION.max(2 * self.near);
        let w = (context.saturating_sub(self.near) as f64 / (far - self.near) as f64).min(1.0);
        [(0, 1.0 - w), (1, w)]
    }
}

/// The timed sizes around `rows` (`1..=BLOCKS`) with their linear weights (summing to 1).
fn knots(rows: usize) -> [(usize, f64); 2] {
    let last = TIMED_ROWS.len() - 1;
    let rows = rows.clamp(TIMED_ROWS[0], TIMED_ROWS[last]);
    let k = TIMED_ROWS.partition_point(|&t| t <= rows).clamp(1, last);
    let (lo, hi) = (TIMED_ROWS[k - 1], TIMED_ROWS[k]);
    let w = (rows - lo) as f64 / (hi - lo) as f64;
    [(k - 1, 1.0 - w), (k, w)]
}

/// Seconds each cached entry adds per block size, from the calibration behind `near` entries
/// and `far_samples` behind `far`; `None` without a usable sample or when `far <= near`.
fn per_entry(
    near_seconds: &PerBlock,
    near: usize,
    far: usize,
    far_samples: &[(usize, f64)],
) -> Option<PerBlock> {
    let far_seconds = interpolate(far_samples).filter(|_| far > near)?;
    let span = (far - near) as f64;
    let mut per_entry: PerBlock =
        std::array::from_fn(|i| ((far_seconds[i] - near_seconds[i]) / span).max(0.0));
    // More rows never read less of the cache.
    make_non_decreasing(&mut per_entry);
    Some(per_entry)
}

/// Seconds for every block size from `(rows, seconds)` samples: linear interpolation between
/// them, constant below the first and linear above the last, made non-decreasing. `None`
/// without a usable sample.
fn interpolate(samples: &[(usize, f64)]) -> Option<PerBlock> {
    let mut s: Vec<(usize, f64)> = samples
        .iter()
        .copied()
        .filter(|&(r, t)| r >= 1 && t.is_finite() && t > 0.0)
        .collect();
    s.sort_by_key(|&(r, _)| r);
    if s.is_empty() {
        return None;
    }
    let at = |rows: usize| -> f64 {
        let i = s.partition_point(|&(r, _)| r <= rows);
        if i == 0 {
            return s[0].1;
        }
        let (r0, t0) = s[i - 1];
        let (r1, t1) = if i < s.len() {
            s[i]
        } else if i >= 2 {
            s[i - 2]
        } else {
            return t0;
        };
        if r1 == r0 {
            return t0;
        }
        t0 + (t1 - t0) * (rows as f64 - r0 as f64) / (r1 as f64 - r0 as f64)
    };
    let mut seconds: PerBlock = std::array::from_fn(|i| at(i + 1));
    make_non_decreasing(&mut seconds);
    Some(seconds)
}

fn make_non_decreasing(values: &mut [f64]) {
    for i in 1..values.len() {
        values[i] = values[i].max(values[i - 1]);
    }
}

/// Cache entries in front of the first timed blocks: verification runs behind a prompt, not
/// on an empty cache.
const NEAR_CONTEXT: usize = 64;
/// The longer context of the online corrections ([`CostModel::observe`]): where the extra
/// rows' attention has become a large part of a forward.
const FAR_CORRECTION: usize = 1024;
/// Shortest context for the second timing ([`calibrate_far`]).
const FAR_CONTEXT_MIN: usize = 256;
/// Blocks timed at each context.
const TIMED_ROWS: [usize; 5] = [1, 2, 4, 8, 16];

/// Measures the target's forward time for blocks of 1, 2, 4, 8 and 16 rows behind a short
/// context (each the least of `repeats` runs, after a warm-up: a first use may compile or
/// allocate; see `time_blocks`), and leaves the cache empty. The model waits for
/// [`calibrate_far`] when the context has room for a long one.
pub async fn calibrate<M: LanguageModel>(
    model: &mut M,
    repeats: usize,
) -> Result<CostModel, ModelError> {
    let vocab = model.config().vocab_size.max(1);
    // Room behind the context for the largest timed block.
    let near = NEAR_CONTEXT.min(model.capacity().saturating_sub(BLOCKS + 1));
    let tokens = filler(vocab, near + BLOCKS);
    model.truncate(0);
    let result = async {
        if near > 0 {
            model
                .forward_argmax(&Batch::causal(&tokens[..near], 0).logits_for_last(0))
                .await?;
        }
        time_blocks(model, &tokens[near..], near, repeats, true).await
    }
    .await;
    model.truncate(0);
    let samples = result?;
    if samples.is_empty() {
        return Ok(CostModel::flat());
    }
    let mut cost = CostModel::from_samples(&samples);
    cost.near = near;
    cost.far_pending = model.capacity() >= FAR_CONTEXT_MIN.max(4 * near) + BLOCKS;
    Ok(cost)
}

/// Times the blocks behind the `model.cache_len()` entries already in the cache (whatever they
/// hold: only the time counts), leaves the cache as it was, and completes `cost` with them
/// (see [`CostModel::wants_far`]). Returns the seconds it took.
pub async fn calibrate_far<M: LanguageModel>(
    model: &mut M,
    cost: &mut CostModel,
    repeats: usize,
) -> Result<f64, ModelError> {
    let start = Instant::now();
    let base = model.cache_len();
    let tokens = filler(model.config().vocab_size.max(1), BLOCKS);
    let samples = time_blocks(model, &tokens, base, repeats, false).await;
    model.truncate(base);
    cost.add_far(base, &samples?);
    Ok(start.elapsed().as_secs_f64())
}

/// `n` arbitrary valid tokens for timed blocks.
fn filler(vocab: usize, n: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + 13) % vocab) as u32).collect()
}

/// `(rows, seconds)` of blocks of `tokens[..rows]` behind the cache's `base` entries: each size
/// the least of `repeats` forwards, taken in rounds over the sizes. Another program's burst on
/// the cores then slows one round of every size, and the other rounds still time the work. One
/// size after another, each its median, 3 of 17 starts of `runahead bench` on a 2-core machine
/// timed every block up to 8 rows like one row at twice its cost (the second core busy with
/// something else for a while), so that speculation started out planning with extra rows for
/// free.
async fn time_blocks<M: LanguageModel>(
    model: &mut M,
    tokens: &[u32],
    base: usize,
    repeats: usize,
    warm_up: bool,
) -> Result<Vec<(usize, f64)>, ModelError> {
    let capacity = model.capacity();
    let sizes: Vec<usize> = TIMED_ROWS
        .iter()
        .copied()
        .filter(|&r| r <= tokens.len() && base + r <= capacity)
        .collect();
    if warm_up {
        for &rows in &sizes {
            model
                .forward_argmax(&Batch::causal(&tokens[..rows], base))
                .await?;
            model.truncate(base);
        }
    }
    let mut least = vec![f64::INFINITY; sizes.len()];
    for _ in 0..repeats.max(1) {
        for (&rows, least) in sizes.iter().zip(&mut least) {
            let start = Instant::now();
            model
                .forward_argmax(&Batch::causal(&tokens[..rows], base))
                .await?;
            *least = least.min(start.elapsed().as_secs_f64());
            model.truncate(base);
        }
    }
    Ok(sizes.into_iter().zip(least).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_interpolate_and_are_monotone() {
        let c = CostModel::from_samples(&[(1, 1.0), (4, 1.6), (16, 4.0), (8, 1.5)]).at(0);
        assert_eq!(c.seconds(1), 1.0);
        assert!((c.seconds(2) - 1.2).abs() < 1e-9);
        assert!(c.seconds(8) >= c.seconds(4), "made non-decreasing");
        assert!((c.seconds(12) - 2.75).abs() < 1e-9);
        assert_eq!(CostModel::from_samples(&[]), CostModel::flat());
        assert_eq!(
            CostModel::from_samples(&[(1, 1.0)]).at(5000),
            CostModel::from_samples(&[(1, 1.0)]).at(0),
            "one context measured: the same at every context"
        );
    }

    /// Weights cost 1.0 per forward and 0.05 per row; attention 0.001 per (row, entry).
    fn synthetic(rows: usize, context: usize) -> f64 {
        1.0 + 0.05 * rows as f64 + 0.001 * (rows * context) as f64
    }

    fn samples_at(context: usize) -> Vec<(usize, f64)> {
        TIMED_ROWS
            .iter()
            .map(|&r| (r, synthetic(r, context)))
            .collect()
    }

    #[test]
    fn two_contexts_give_the_cost_at_any_context() {
        let c = CostModel::from_two_contexts(64, &samples_at(64), 512, &samples_at(512));
        for context in [0, 64, 300, 512, 2000] {
            for rows in TIMED_ROWS {
                let (got, want) = (c.at(context).seconds(rows), synthetic(rows, context));
                assert!(
                    (got - want).abs() < 1e-9,
                    "{rows} rows at {context}: {got} vs {want}"
                );
            }
        }
        // Behind a long prompt, 16 rows cost far more than one; behind a short one, not.
        assert!(c.at(64).ratios()[15] < 3.0);
        assert!(c.at(2000).ratios()[15] > 10.0);
        // A far measurement faster than the near one (noise) adds no negative slope.
        let noisy = CostModel::from_two_contexts(64, &samples_at(512), 512, &samples_at(64));
        assert_eq!(noisy.at(5000), noisy.at(64));
    }

    #[test]
    fn a_long_context_completes_a_short_calibration() {
        let mut c = CostModel::from_samples(&samples_at(64));
        c.near = 64;
        c.far_pending = true;
        assert!(!c.wants_far(200), "too close to the first context");
        assert!(c.wants_far(300));
        c.observe(1, 64, 2.0 * synthetic(1, 64));
        let mut done = c.clone();
        done.add_far(700, &samples_at(700));
        assert!(!done.wants_far(5000));
        assert_eq!(done.drift, c.drift, "online corrections are kept");
        let (got, want) = (done.modeled(16, 2000), synthetic(16, 2000));
        assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    }

    /// Scaling the extra rows keeps one row's cost at every context and scales the rest of
    /// each block's (the weights' share per row and attention's alike).
    #[test]
    fn extra_rows_scale_and_one_row_stays() {
        let c = CostModel::from_two_contexts(64, &samples_at(64), 512, &samples_at(512));
        let half = c.with_extra_rows_scaled(0.5);
        for context in [64, 300, 2000] {
            let (a, b) = (c.at(context), half.at(context));
            assert!((a.seconds(1) - b.seconds(1)).abs() < 1e-9);
            for rows in [2, 5, 16] {
                let want = a.seconds(1) + 0.5 * (a.seconds(rows) - a.seconds(1));
                assert!((b.seconds(rows) - want).abs() < 1e-9, "{rows} at {context}");
            }
        }
    }

    #[test]
    fn sizes_between_observed_ones_follow_them() {
        let mut c = CostModel::from_two_contexts(64, &samples_at(64), 512, &samples_at(512));
        // One row slower than calibrated (say, the loop's own overhead), two and four rows as
        // calibrated, three never verified: three stays between its neighbours.
        for _ in 0..200 {
            c.observe(1, 200, 1.15 * synthetic(1, 200));
            c.observe(2, 200, synthetic(2, 200));
            c.observe(4, 200, synthetic(4, 200));
        }
        let ratio = |rows| c.at(200).seconds(rows) / synthetic(rows, 200);
        assert!((ratio(1) - 1.15).abs() < 0.01, "{}", ratio(1));
        for rows in [2, 3, 4] {
            assert!(
                (ratio(rows) - 1.0).abs() < 0.01,
                "{rows} rows: {}",
                ratio(rows)
            );
        }
        assert_eq!(knots(16), [(3, 0.0), (4, 1.0)]);
        assert_eq!(knots(6), [(2, 0.5), (3, 0.5)]);
    }

    #[test]
    fn a_line_too_steep_is_corrected_at_both_ends() {
        // Calibrated behind 64 and 300 entries where the cost at 300 read 30% high on the
        // extra rows (a noisy second timing), so the line overprices long contexts.
        let high: Vec<(usize, f64)> = samples_at(300)
            .into_iter()
            .map(|(r, t)| (r, synthetic(1, 300) + 1.3 * (t - synthetic(1, 300))))
            .collect();
        let mut c = CostModel::from_two_contexts(64, &samples_at(64), 300, &high);
        let error =
            |c: &CostModel, rows, context| c.at(context).seconds(rows) / synthetic(rows, context);
        assert!(
            error(&c, 8, 900) > 1.2,
            "the line overprices: {}",
            error(&c, 8, 900)
        );
        // Steps behind short and long contexts, as generations take them.
        for i in 0..600 {
            let (rows, context) = ([1, 2, 4, 8][i % 4], [150, 900][i / 4 % 2]);
            c.observe(rows, context, synthetic(rows, context));
        }
        for context in [150, 900] {
            for rows in [1, 2, 4, 8] {
                let e = error(&c, rows, context);
                assert!((e - 1.0).abs() < 0.05, "{rows} rows behind {context}: {e}");
            }
        }
    }

    #[test]
    fn observations_follow_the_device() {
        let mut c = CostModel::from_two_contexts(64, &samples_at(64), 512, &samples_at(512));
        // The device slows down by half: a few forwards of one size move every size.
        for _ in 0..40 {
            c.observe(1, 200, 1.5 * synthetic(1, 200));
        }
        let one = c.at(200).seconds(1) / synthetic(1, 200);
        let nine = c.at(200).seconds(9) / synthetic(9, 200);
        assert!((one - 1.5).abs() < 0.02, "observed size: {one}");
        assert!(
            nine > 1.3,
            "unobserved sizes follow part of the drift: {nine}"
        );
        // Garbage is ignored.
        let before = c.clone();
        c.observe(0, 10, 1.0);
        c.observe(3, 10, f64::NAN);
        c.observe(99, 10, 1.0);
        c.observe(3, 10, -1.0);
        assert_eq!(c, before);
    }
}
