//! Sampling: greedy, temperature, top-k, top-p, from a seeded generator.
//!
//! The distribution is built in a fixed order: temperature scaling, softmax, top-k, then
//! top-p (nucleus) over what top-k kept, renormalized. Speculative sampling uses the same
//! [`Distribution`] for the target and the draft so that both see identical processing.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use runahead_model::{argmax, top_k_of, Batch, LanguageModel, Logits, ModelError, TopLogits};

/// Invalid sampling parameters.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SamplingError {
    #[error("temperature must be a finite number >= 0 (0 means greedy), got {0}")]
    Temperature(f32),
    #[error("top-p must be in (0, 1], got {0}")]
    TopP(f32),
    #[error("logits contain no finite value")]
    NoFiniteLogit,
    #[error("sampling needs logits, but only each row's argmax was read back")]
    NeedsLogits,
}

/// How to pick each token.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 picks the most likely token (greedy); otherwise logits are divided by it.
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens; 0 keeps all.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability reaches `top_p`.
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            seed: 0,
        }
    }
}

impl SamplingParams {
    pub fn greedy() -> Self {
        Self::default()
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature == 0.0
    }

    pub fn validate(&self) -> Result<(), SamplingError> {
        if !self.temperature.is_finite() || self.temperature < 0.0 {
            return Err(SamplingError::Temperature(self.temperature));
        }
        if !(self.top_p > 0.0 && self.top_p <= 1.0) {
            return Err(SamplingError::TopP(self.top_p));
        }
        Ok(())
    }
}

/// A processed next-token distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    /// `[vocab]`: probability of each token (0 outside the support).
    pub probs: Vec<f32>,
    /// Tokens with non-zero probability, most likely first (ties: lower id first).
    pub support: Vec<u32>,
}

impl Distribution {
    /// Builds the distribution `params` define over `logits`. For greedy params it is the
    /// one-hot distribution of the argmax.
    pub fn new(logits: &[f32], params: &SamplingParams) -> Result<Self, SamplingError> {
        let vocab = logits.len();
        if !logits.iter().any(|v| v.is_finite()) {
            return Err(SamplingError::NoFiniteLogit);
        }
        if params.is_greedy() {
            return Ok(Self::one_hot(vocab, argmax(logits)));
        }
        let k = if params.top_k > 0 {
            params.top_k
        } else {
            vocab
        };
        Self::ranked(vocab, &top_k_of(logits, k), params)
    }

    /// The same distribution as [`Distribution::new`] from only the largest logits of the row
    /// (`top`, as [`top_k_of`] lists them, at least `params.top_k` of them or all the row has):
    /// with top-k sampling they are all it depends on.
    pub fn from_top(
        vocab: usize,
        top: &[(u32, f32)],
        params: &SamplingParams,
    ) -> Result<Self, SamplingError> {
        if !top.iter().any(|(_, v)| v.is_finite()) {
            return Err(SamplingError::NoFiniteLogit);
        }
        if params.is_greedy() {
            return Ok(Self::one_hot(vocab, top[0].0));
        }
        let k = if params.top_k > 0 {
            params.top_k
        } else {
            vocab
        };
        Self::ranked(vocab, &top[..k.min(top.len())], params)
    }

    fn one_hot(vocab: usize, token: u32) -> Self {
        let mut probs = vec![0f32; vocab];
        probs[token as usize] = 1.0;
        Distribution {
            probs,
            support: vec![token],
        }
    }

    /// Temperature, softmax and top-p over `order`, the kept (token, logit) pairs, most likely
    /// first.
    fn ranked(
        vocab: usize,
        order: &[(u32, f32)],
        params: &SamplingParams,
    ) -> Result<Self, SamplingError> {
        let Some(&(_, max)) = order.first() else {
            return Err(SamplingError::NoFiniteLogit);
        };
        let inv_t = 1.0 / params.temperature;
        let weights: Vec<f64> = order
            .iter()
            .map(|&(_, l)| (((l - max) * inv_t) as f64).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut keep = order.len();
        if params.top_p < 1.0 {
            let mut cum = 0.0;
            for (n, w) in weights.iter().enumerate() {
                cum += w / total;
                if cum >= params.top_p as f64 {
                    keep = n + 1;
                    break;
                }
            }
        }
        let kept_total: f64 = weights[..keep].iter().sum();
        let mut probs = vec![0f32; vocab];
        for (&(i, _), &w) in order[..keep].iter().zip(&weights) {
            probs[i as usize] = (w / kept_total) as f32;
        }
        Ok(Distribution {
            probs,
            support: order[..keep].iter().map(|&(i, _)| i).collect(),
        })
    }

    /// This distribution with `token` removed and the rest renormalized: the residual
    /// `max(0, p - q)` of speculative sampling when the draft distribution `q` is one-hot on
    /// `token`.
    pub fn without(&self, token: u32) -> Distribution {
        let mut probs = self.probs.clone();
        let removed = probs.get(token as usize).copied().unwrap_or(0.0);
        if let Some(p) = probs.get_mut(token as usize) {
            *p = 0.0;
        }
        let rest = 1.0 - removed as f64;
        if rest > 0.0 {
            probs
                .iter_mut()
                .for_each(|p| *p = (*p as f64 / rest) as f32);
        }
        let support = self
            .support
            .iter()
            .copied()
            .filter(|&t| t != token)
            .collect();
        Distribution { probs, support }
    }

    /// The residual `max(0, p - q)` renormalized, over the full vocabulary: what speculative
    /// sampling draws from after rejecting a token sampled from `q`. A rejection is only
    /// possible where `p < q` somewhere, so the residual has mass; if rounding leaves none,
    /// `p` itself is returned.
    pub fn residual(&self, q: &Distribution) -> Distribution {
        let mut probs: Vec<f64> = self
            .probs
            .iter()
            .enumerate()
            .map(|(i, &p)| (p as f64 - q.probs.get(i).copied().unwrap_or(0.0) as f64).max(0.0))
            .collect();
        let total: f64 = probs.iter().sum();
        if total <= 0.0 {
            return self.clone();
        }
        probs.iter_mut().for_each(|p| *p /= total);
        let support = self
            .support
            .iter()
            .copied()
            .filter(|&t| probs[t as usize] > 0.0)
            .collect();
        Distribution {
            probs: probs.into_iter().map(|p| p as f32).collect(),
            support,
        }
    }

    /// The token at cumulative probability `u` in `[0, 1)`, walking the support in order.
    pub fn pick(&self, u: f64) -> u32 {
        let mut cum = 0.0f64;
        for &t in &self.support {
            cum += self.probs[t as usize] as f64;
            if u < cum {
                return t;
            }
        }
        // Rounding left `u` past the last cumulative sum: the least likely kept token.
        *self.support.last().unwrap_or(&0)
    }
}

/// Draws tokens from processed distributions with a seeded ChaCha8 generator, so a run is
/// reproducible from its seed on every platform.
pub struct Sampler {
    pub params: SamplingParams,
    rng: ChaCha8Rng,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Result<Self, SamplingError> {
        params.validate()?;
        let rng = ChaCha8Rng::seed_from_u64(params.seed);
        Ok(Sampler { params, rng })
    }

    /// A uniform number in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn distribution(&self, logits: &[f32]) -> Result<Distribution, SamplingError> {
        Distribution::new(logits, &self.params)
    }

    /// Picks the next token from row `r` of `scores`. Greedy parameters consume no
    /// randomness.
    pub fn pick(&mut self, scores: &Scores, r: usize) -> Result<u32, SamplingError> {
        match scores {
            Scores::Logits(logits) => self.sample(logits.row(r)),
            Scores::Argmax(ids) if self.params.is_greedy() => Ok(ids[r]),
            _ if self.params.is_greedy() => Ok(scores.distribution(r, &self.params)?.support[0]),
            _ => {
                let dist = scores.distribution(r, &self.params)?;
                let u = self.uniform();
                Ok(dist.pick(u))
            }
        }
    }

    /// Picks the next token from `logits`. Greedy parameters consume no randomness.
    pub fn sample(&mut self, logits: &[f32]) -> Result<u32, SamplingError> {
        if self.params.is_greedy() {
            if !logits.iter().any(|v| v.is_finite()) {
                return Err(SamplingError::NoFiniteLogit);
            }
            return Ok(argmax(logits));
        }
        let dist = self.distribution(logits)?;
        let u = self.uniform();
        Ok(dist.pick(u))
    }
}

/// A forward's rows as sampling with given parameters needs them, so that an engine that
/// selects on the device reads back a few bytes per row instead of the vocabulary: each row's
/// argmax when greedy, its `top_k` largest logits with top-k sampling, else whole rows.
#[derive(Clone, Debug)]
pub enum Scores {
    Argmax(Vec<u32>),
    Top(TopLogits),
    Logits(Logits),
}

impl Scores {
    /// Runs `batch` on `model`, reading back what `params` need.
    pub async fn forward<M: LanguageModel>(
        model: &mut M,
        batch: &Batch,
        params: &SamplingParams,
    ) -> Result<Self, ModelError> {
        Ok(if params.is_greedy() {
            Scores::Argmax(model.forward_argmax(batch).await?)
        } else if params.top_k > 0 {
            Scores::Top(model.forward_top_k(batch, params.top_k).await?)
        } else {
            Scores::Logits(model.forward(batch).await?)
        })
    }

    pub fn n_rows(&self) -> usize {
        match self {
            Scores::Argmax(ids) => ids.len(),
            Scores::Top(t) => t.rows.len(),
            Scores::Logits(l) => l.n_rows(),
        }
    }

    /// Row `r`'s distribution under `params` (one-hot on the argmax when greedy). `Argmax`
    /// scores only serve greedy parameters.
    pub fn distribution(
        &self,
        r: usize,
        params: &SamplingParams,
    ) -> Result<Distribution, SamplingError> {
        match self {
            Scores::Logits(l) => Distribution::new(l.row(r), params),
            Scores::Top(t) => Distribution::from_top(t.vocab, &t.rows[r], params),
            Scores::Argmax(_) => Err(SamplingError::NeedsLogits),
        }
    }

    /// Row `r`'s most likely token and its softmax probability at temperature 1, when the
    /// scores tell it (not from `Argmax`).
    pub fn best(&self, r: usize) -> Option<(u32, f32)> {
        match self {
            Scores::Top(t) => {
                let &(token, logit) = t.rows[r].first()?;
                Some((token, (logit - t.log_norm[r]).exp()))
            }
            Scores::Logits(l) => {
                let row = l.row(r);
                let token = argmax(row);
                let p = (row[token as usize] - runahead_model::log_sum_exp(row)).exp();
                Some((token, p))
            }
            Scores::Argmax(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(temperature: f32, top_k: usize, top_p: f32) -> SamplingParams {
        SamplingParams {
            temperature,
            top_k,
            top_p,
            seed: 7,
        }
    }

    #[test]
    fn invalid_parameters_are_rejected() {
        assert_eq!(
            Sampler::new(params(-1.0, 0, 1.0)).err(),
            Some(SamplingError::Temperature(-1.0))
        );
        assert!(matches!(
            Sampler::new(params(f32::NAN, 0, 1.0)),
            Err(SamplingError::Temperature(_))
        ));
        assert_eq!(
            Sampler::new(params(1.0, 0, 0.0)).err(),
            Some(SamplingError::TopP(0.0))
        );
        assert_eq!(
            Sampler::new(params(1.0, 0, 1.5)).err(),
            Some(SamplingError::TopP(1.5))
        );
        let mut s = Sampler::new(params(1.0, 0, 1.0)).unwrap();
        assert_eq!(
            s.sample(&[f32::NAN, f32::NEG_INFINITY]),
            Err(SamplingError::NoFiniteLogit)
        );
    }

    #[test]
    fn greedy_is_argmax_with_lowest_id_on_ties() {
        let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
        assert_eq!(s.sample(&[0.0, 2.0, 2.0, 1.0]).unwrap(), 1);
    }

    #[test]
    fn temperature_top_k_top_p() {
        let logits = [0.0f32, 1.0, 2.0, 3.0];
        let d = Distribution::new(&logits, &params(1.0, 0, 1.0)).unwrap();
        let z: f32 = logits.iter().map(|l| l.exp()).sum();
        for (i, l) in logits.iter().enumerate() {
            assert!((d.probs[i] - l.exp() / z).abs() < 1e-6);
        }
        assert_eq!(d.support, vec![3, 2, 1, 0]);
        // top-k 2 keeps tokens 3 and 2, renormalized.
        let d = Distribution::new(&logits, &params(1.0, 2, 1.0)).unwrap();
        assert_eq!(d.support, vec![3, 2]);
        assert!((d.probs[3] - 1.0f32.exp() / (1.0 + 1.0f32.exp())).abs() < 1e-6);
        // top-p 0.5: token 3 alone has 0.64 of the mass.
        let d = Distribution::new(&logits, &params(1.0, 0, 0.5)).unwrap();
        assert_eq!(d.support, vec![3]);
        assert_eq!(d.probs[3], 1.0);
        // A high temperature flattens.
        let d = Distribution::new(&logits, &params(100.0, 0, 1.0)).unwrap();
        assert!(d.probs.iter().all(|&p| (p - 0.25).abs() < 0.01));
    }

    #[test]
    fn the_top_logits_give_the_same_distribution_as_the_whole_row() {
        let mut logits: Vec<f32> = (0..300).map(|i| ((i * 37) % 101) as f32 / 17.0).collect();
        logits[5] = f32::NAN;
        logits[6] = f32::NEG_INFINITY;
        for (k, p) in [(1, 1.0), (3, 1.0), (20, 0.9), (64, 0.5), (300, 1.0)] {
            let params = params(0.8, k, p);
            let whole = Distribution::new(&logits, &params).unwrap();
            // The engine may list more than top_k entries: only the first top_k count.
            let top = top_k_of(&logits, k + 5);
            assert_eq!(
                Distribution::from_top(logits.len(), &top, &params).unwrap(),
                whole,
                "top-{k}, top-p {p}"
            );
        }
        assert_eq!(
            Distribution::from_top(4, &[], &params(1.0, 2, 1.0)),
            Err(SamplingError::NoFiniteLogit)
        );
    }

    #[test]
    fn seeded_sampling_is_reproducible_and_follows_the_distribution() {
        let logits = [1.0f32, 2.0, 0.5, 1.5];
        let draw = |seed| {
            let mut s = Sampler::new(SamplingParams {
                seed,
                ..params(1.0, 0, 1.0)
            })
            .unwrap();
            (0..20000)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        let a = draw(1);
        assert_eq!(a, draw(1));
        assert_ne!(a, draw(2));
        let d = Distribution::new(&logits, &params(1.0, 0, 1.0)).unwrap();
        for t in 0..4u32 {
            let freq = a.iter().filter(|&&x| x == t).count() as f32 / a.len() as f32;
            assert!(
                (freq - d.probs[t as usize]).abs() < 0.015,
                "token {t}: {freq} vs {}",
                d.probs[t as usize]
            );
        }
    }
}
