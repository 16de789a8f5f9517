//! What is done to the target's logits before sampling besides the sampling parameters:
//! OpenAI's frequency and presence penalties over the generated tokens, a bias per token, and
//! the log-probabilities reported for each emitted token.
//!
//! The penalties depend on the tokens generated before a position, so during verification each
//! row is processed with the counts of the path that leads to it (the walk visits the accepted
//! path only): the output stays exactly what plain decoding with the same options gives.

use ahash::AHashMap;
use runahead_model::{log_sum_exp, top_k_of};

/// The most alternatives a token's log-probability lists (OpenAI's `top_logprobs` bound).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// Logit processing and reporting options of a generation. The default does nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogitOptions {
    /// Subtracted from a token's logit once per time it was generated (OpenAI's
    /// `frequency_penalty`, -2 to 2).
    pub frequency_penalty: f32,
    /// Subtracted from a token's logit once it was generated at all (OpenAI's
    /// `presence_penalty`, -2 to 2).
    pub presence_penalty: f32,
    /// Added to a token's logit (OpenAI's `logit_bias`, -100 to 100; -100 bans a token).
    pub logit_bias: Vec<(u32, f32)>,
    /// Report each emitted token's log-probability with this many most likely alternatives
    /// (0 to [`MAX_TOP_LOGPROBS`]); `None` reports none.
    pub logprobs: Option<usize>,
}

/// Options out of their range.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum LogitError {
    #[error("{0}: expected a number from -2 to 2, got {1}")]
    Penalty(&'static str, f32),
    #[error("logit_bias: expected a bias from -100 to 100 for token {0}, got {1}")]
    Bias(u32, f32),
    #[error("logit_bias: token {0} is not in the vocabulary ({1} tokens)")]
    BiasToken(u32, usize),
    #[error("top_logprobs: expected 0 to {MAX_TOP_LOGPROBS}, got {0}")]
    TopLogprobs(usize),
}

impl LogitOptions {
    /// Whether the generation must process whole logit rows (anything but the default).
    pub fn is_active(&self) -> bool {
        self.changes_logits() || self.logprobs.is_some()
    }

    fn changes_logits(&self) -> bool {
        self.frequency_penalty != 0.0 || self.presence_penalty != 0.0 || !self.logit_bias.is_empty()
    }

    /// Checks the ranges OpenAI's API gives them, and the bias's tokens against `vocab`.
    pub fn validate(&self, vocab: usize) -> Result<(), LogitError> {
        for (name, v) in [
            ("frequency_penalty", self.frequency_penalty),
            ("presence_penalty", self.presence_penalty),
        ] {
            if !(-2.0..=2.0).contains(&v) {
                return Err(LogitError::Penalty(name, v));
            }
        }
        for &(token, bias) in &self.logit_bias {
            if !(-100.0..=100.0).contains(&bias) {
                return Err(LogitError::Bias(token, bias));
            }
            if token as usize >= vocab {
                return Err(LogitError::BiasToken(token, vocab));
            }
        }
        match self.logprobs {
            Some(k) if k > MAX_TOP_LOGPROBS => Err(LogitError::TopLogprobs(k)),
            _ => Ok(()),
        }
    }
}

/// One emitted token's log-probability and the most likely alternatives at its position.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub token: u32,
    pub logprob: f32,
    /// Most likely first (ties: lower id first); as many as asked for, fewer only where fewer
    /// tokens have a finite logit.
    pub top: Vec<(u32, f32)>,
}

/// The generation's side of [`LogitOptions`]: the counts of the tokens generated so far.
pub(crate) struct LogitProcessor {
    opts: LogitOptions,
    counts: AHashMap<u32, u32>,
}

impl LogitProcessor {
    pub(crate) fn new(opts: LogitOptions) -> Self {
        LogitProcessor {
            opts,
            counts: AHashMap::new(),
        }
    }

    pub(crate) fn reports_logprobs(&self) -> bool {
        self.opts.logprobs.is_some()
    }

    /// Counts a generated token.
    pub(crate) fn commit(&mut self, token: u32) {
        if self.opts.frequency_penalty != 0.0 || self.opts.presence_penalty != 0.0 {
            *self.counts.entry(token).or_default() += 1;
        }
    }

    /// Applies the bias and the penalties to `logits` in place.
    pub(crate) fn apply(&self, logits: &mut [f32]) {
        if !self.opts.changes_logits() {
            return;
        }
        for &(token, bias) in &self.opts.logit_bias {
            if let Some(l) = logits.get_mut(token as usize) {
                *l += bias;
            }
        }
        let (freq, presence) = (self.opts.frequency_penalty, self.opts.presence_penalty);
        for (&token, &count) in &self.counts {
            if let Some(l) = logits.get_mut(token as usize) {
                *l -= freq * count as f32 + presence;
            }
        }
    }

    /// The log-probability of `token` and the top alternatives under `logits` (already
    /// processed and masked) at `temperature` (0, greedy, reports the model's at 1).
    pub(crate) fn logprob(&self, logits: &[f32], temperature: f32, token: u32) -> TokenLogprob {
        let k = self.opts.logprobs.unwrap_or(0);
        let scaled;
        let row = if temperature > 0.0 && temperature != 1.0 {
            scaled = logits.iter().map(|l| l / temperature).collect::<Vec<f32>>();
            &scaled[..]
        } else {
            logits
        };
        let norm = log_sum_exp(row);
        let lp = |l: f32| l - norm;
        let logprob = row
            .get(token as usize)
            .map_or(f32::NEG_INFINITY, |&l| lp(l));
        let top = if k == 0 {
            Vec::new()
        } else {
            top_k_of(row, k)
                .into_iter()
                .filter(|(_, l)| l.is_finite())
                .map(|(t, l)| (t, lp(l)))
                .collect()
        };
        TokenLogprob {
            token,
            logprob,
            top,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn penalties_follow_openais_formula_and_bias_adds() {
        let mut p = LogitProcessor::new(LogitOptions {
            frequency_penalty: 0.5,
            presence_penalty: 1.0,
            logit_bias: vec![(3, -100.0)],
            logprobs: None,
        });
        for t in [1, 1, 2] {
            p.commit(t);
        }
        let mut logits = vec![0.0f32; 4];
        p.apply(&mut logits);
        assert_eq!(logits, vec![0.0, -2.0, -1.5, -100.0]);
    }

    #[test]
    fn logprobs_are_the_log_softmax_at_the_temperature() {
        let p = LogitProcessor::new(LogitOptions {
            logprobs: Some(2),
            ..LogitOptions::default()
        });
        let logits = [1.0f32, 3.0, f32::NEG_INFINITY, 2.0];
        let z: f32 = [1.0f32, 3.0, 2.0].iter().map(|l| l.exp()).sum();
        let lp = p.logprob(&logits, 0.0, 0);
        assert!((lp.logprob - (1.0 - z.ln())).abs() < 1e-5);
        assert_eq!(lp.top.iter().map(|t| t.0).collect::<Vec<_>>(), vec![1, 3]);
        let hot = p.logprob(&logits, 0.5, 1);
        let z2: f32 = [2.0f32, 6.0, 4.0].iter().map(|l| l.exp()).sum();
        assert!((hot.logprob - (6.0 - z2.ln())).abs() < 1e-5);
        assert_eq!(p.logprob(&logits, 1.0, 2).logprob, f32::NEG_INFINITY);
    }

    #[test]
    fn ranges_are_checked() {
        let bad = |o: LogitOptions| o.validate(10).is_err();
        assert!(bad(LogitOptions {
            frequency_penalty: 2.5,
            ..Default::default()
        }));
        assert!(bad(LogitOptions {
            logit_bias: vec![(1, 101.0)],
            ..Default::default()
        }));
        assert!(bad(LogitOptions {
            logit_bias: vec![(10, 1.0)],
            ..Default::default()
        }));
        assert!(bad(LogitOptions {
            logprobs: Some(21),
            ..Default::default()
        }));
        assert!(LogitOptions {
            presence_penalty: -2.0,
            logit_bias: vec![(9, -100.0)],
            logprobs: Some(20),
            ..Default::default()
        }
        .validate(10)
        .is_ok());
    }
}
