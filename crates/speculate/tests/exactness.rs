//! Speculative sampling draws from exactly the distribution plain sampling draws from.
//!
//! The target is a small model whose distribution is known in closed form: an order-2 Markov
//! chain over a 3-token vocabulary (logits looked up from the two previous tokens; in a tree
//! block the previous token is the parent). Every 5-token continuation's probability is
//! computed exactly, and 20,000 seeded speculative generations are compared with it by a
//! chi-square test, for a chain drafter, a tree drafter and a sampling draft model, with and
//! without top-k / top-p. A deliberately broken verifier (resampling from `p` instead of the
//! residual after a rejection) must fail the same test. Under a small grammar, speculative
//! sampling draws from the target's distribution with the forbidden tokens masked out.

use std::collections::HashMap;
use std::ops::ControlFlow;

use pollster::block_on;
use runahead_model::testing::TestRng;
use runahead_model::{
    argmax_rows, Architecture, Batch, LanguageModel, Logits, Mask, ModelConfig, ModelError,
    RopeMode, TopLogits,
};
use runahead_speculate::{
    generate_constrained, generate_with, ready, Constraint, ConstraintError, Depth, Distribution,
    Draft, DraftRequest, Drafter, GenerateOptions, KvTokens, LocalFuture, ModelDrafter, Provenance,
    Rejection, SamplingParams, TokenSet,
};

const V: usize = 3;
const LEN: usize = 5;
const DRAWS: u64 = 20_000;

/// Order-2 Markov chain as a `LanguageModel`: row logits depend on the row's token and the
/// token before it (its parent in a tree block, the last cached token for the first row).
struct Markov {
    logits: Vec<f32>, // [V (prev), V (cur), V (next)]
    cache: Vec<u32>,
    config: ModelConfig,
}

impl Markov {
    fn new(seed: u64, sharpness: f32) -> Self {
        let mut rng = TestRng::new(seed);
        Markov {
            logits: rng.floats(V * V * V, sharpness),
            cache: Vec::new(),
            config: ModelConfig {
                arch: Architecture::Llama,
                n_layers: 1,
                n_embd: 1,
                n_ff: 1,
                n_heads: 1,
                n_kv_heads: 1,
                head_dim: 1,
                rope_mode: RopeMode::Normal,
                rope_base: 1.0,
                rope_dim: 1,
                rms_eps: 1e-5,
                context_length: 64,
                vocab_size: V,
                qkv_bias: false,
            },
        }
    }

    fn row(&self, prev: u32, cur: u32) -> &[f32] {
        let at = (prev as usize * V + cur as usize) * V;
        &self.logits[at..at + V]
    }
}

impl LanguageModel for Markov {
    fn config(&self) -> &ModelConfig {
        &self.config
    }
    fn cache_len(&self) -> usize {
        self.cache.len()
    }
    fn capacity(&self) -> usize {
        64
    }
    async fn forward_argmax(&mut self, batch: &Batch) -> Result<Vec<u32>, ModelError> {
        argmax_rows(&self.forward(batch).await?)
    }
    async fn forward_top_k(&mut self, batch: &Batch, k: usize) -> Result<TopLogits, ModelError> {
        Ok(TopLogits::of(&self.forward(batch).await?, k))
    }
    async fn forward(&mut self, batch: &Batch) -> Result<Logits, ModelError> {
        batch.validate(V, self.cache.len(), 64)?;
        let last = self.cache.last().copied().unwrap_or(0);
        let mut data = Vec::new();
        for (i, &t) in batch.tokens.iter().enumerate().skip(batch.first_output) {
            let parent = match &batch.mask {
                Mask::Causal => i.checked_sub(1),
                Mask::Tree(parents) => parents[i],
            };
            let prev = parent.map_or(last, |p| batch.tokens[p]);
            data.extend_from_slice(self.row(prev, t));
        }
        self.cache.extend_from_slice(&batch.tokens);
        Ok(Logits { data, vocab: V })
    }
    fn truncate_floor(&self) -> usize {
        0
    }
    fn truncate(&mut self, len: usize) {
        self.cache.truncate(len);
    }
    fn compact(&mut self, base: usize, keep: &[usize]) -> Result<(), ModelError> {
        let kept: Vec<u32> = keep.iter().map(|&k| self.cache[base + k]).collect();
        self.cache.truncate(base);
        self.cache.extend(kept);
        Ok(())
    }
}

/// Deterministic chain: the two tokens an unrelated chain finds most likely.
struct ChainGuess(Markov);

impl Drafter for ChainGuess {
    fn name(&self) -> &'static str {
        "chain"
    }
    fn propose<'a>(
        &'a mut self,
        r: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        let c = r.context;
        let (mut prev, mut cur) = (c[c.len().saturating_sub(2)], c[c.len() - 1]);
        let mut tokens = Vec::new();
        for _ in 0..r.max_nodes.min(3) {
            let next = runahead_model::argmax(self.0.row(prev, cur));
            tokens.push(next);
            (prev, cur) = (cur, next);
        }
        ready(Ok(Draft::chain("chain", &tokens, 0.9)))
    }
}

/// Deterministic tree: two candidates for the next token, each with two children.
struct TreeGuess;

impl Drafter for TreeGuess {
    fn name(&self) -> &'static str {
        "tree"
    }
    fn propose<'a>(
        &'a mut self,
        r: DraftRequest<'a>,
    ) -> LocalFuture<'a, Result<Draft, ModelError>> {
        let last = *r.context.last().unwrap();
        let mut d = Draft::empty("tree");
        let (a, b) = ((last + 1) % V as u32, (last + 2) % V as u32);
        d.push(a, None, 0.9);
        d.push(b, None, 0.5);
        d.push(a, Some(0), 0.8);
        d.push(b, Some(0), 0.4);
        d.push(a, Some(1), 0.7);
        d.truncate_to_best(r.max_nodes);
        ready(Ok(d))
    }
}

fn params(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        top_k,
        top_p,
        seed,
    }
}

/// Exact probability of each continuation of `prompt` of LEN tokens.
fn exact(target: &Markov, prompt: &[u32], p: &SamplingParams) -> HashMap<Vec<u32>, f64> {
    let mut out = HashMap::new();
    for code in 0..V.pow(LEN as u32) {
        let seq: Vec<u32> = (0..LEN)
            .map(|i| ((code / V.pow(i as u32)) % V) as u32)
            .collect();
        let mut full = prompt.to_vec();
        let mut prob = 1.0f64;
        for &t in &seq {
            let n = full.len();
            let d = Distribution::new(target.row(full[n - 2], full[n - 1]), p).unwrap();
            prob *= d.probs[t as usize] as f64;
            full.push(t);
        }
        out.insert(seq, prob);
    }
    out
}

/// Chi-square statistic of the draws against `exact`, cells with expected count < 5 merged,
/// and the critical value at p = 1e-4 for its degrees of freedom (Wilson-Hilferty).
fn chi_square(draws: &HashMap<Vec<u32>, u64>, exact: &HashMap<Vec<u32>, f64>) -> (f64, f64) {
    let n = DRAWS as f64;
    let (mut stat, mut cells) = (0.0, 0usize);
    let (mut small_obs, mut small_exp) = (0.0, 0.0);
    for (seq, &p) in exact {
        let obs = *draws.get(seq).unwrap_or(&0) as f64;
        let exp = p * n;
        if exp < 5.0 {
            small_obs += obs;
            small_exp += exp;
            continue;
        }
        stat += (obs - exp).powi(2) / exp;
        cells += 1;
    }
    if small_exp > 0.0 {
        stat += (small_obs - small_exp).powi(2) / small_exp.max(1.0);
        cells += 1;
    }
    let df = (cells - 1) as f64;
    let z = 3.719;
    let a = 2.0 / (9.0 * df);
    (stat, df * (1.0 - a + z * a.sqrt()).powi(3))
}

fn sample_many(
    drafter: &mut dyn Drafter,
    p: &SamplingParams,
    rejection: Rejection,
) -> HashMap<Vec<u32>, u64> {
    let mut target = Markov::new(1, 1.5);
    let mut counts = HashMap::new();
    for seed in 0..DRAWS {
        let opts = GenerateOptions {
            max_tokens: LEN,
            sampling: SamplingParams { seed, ..p.clone() },
            depth: Depth::Fixed(5),
            rejection,
            logits: Default::default(),
        };
        let g = block_on(generate_with(
            &mut target,
            Some(&mut *drafter),
            &[0, 1],
            &opts,
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ))
        .unwrap();
        *counts.entry(g.tokens).or_insert(0) += 1;
    }
    counts
}

fn check(name: &str, drafter: &mut dyn Drafter, p: SamplingParams) {
    let truth = exact(&Markov::new(1, 1.5), &[0, 1], &p);
    let (stat, crit) = chi_square(&sample_many(drafter, &p, Rejection::Residual), &truth);
    eprintln!("{name} {p:?}: chi2 {stat:.1} (critical {crit:.1})");
    assert!(
        stat < crit,
        "{name}: speculative sampling differs from the target: chi2 {stat:.1} >= {crit:.1}"
    );
}

fn check_broken_fails(name: &str, drafter: &mut dyn Drafter, p: SamplingParams) {
    let truth = exact(&Markov::new(1, 1.5), &[0, 1], &p);
    let draws = sample_many(drafter, &p, Rejection::BrokenResampleFromTarget);
    let (stat, crit) = chi_square(&draws, &truth);
    eprintln!("{name} broken verifier: chi2 {stat:.1} (critical {crit:.1})");
    assert!(
        stat > crit,
        "{name}: the test did not catch a broken verifier (chi2 {stat:.1})"
    );
}

#[test]
fn chain_drafts_sample_the_target_distribution() {
    let mut d = ChainGuess(Markov::new(2, 1.5));
    check("chain", &mut d, params(1.0, 0, 1.0, 0));
    check("chain top-k/top-p", &mut d, params(0.8, 2, 0.9, 0));
    check_broken_fails("chain", &mut d, params(1.0, 0, 1.0, 0));
}

#[test]
fn tree_drafts_sample_the_target_distribution() {
    check("tree", &mut TreeGuess, params(1.0, 0, 1.0, 0));
    check("tree top-k/top-p", &mut TreeGuess, params(1.3, 2, 0.95, 0));
    check_broken_fails("tree", &mut TreeGuess, params(1.0, 0, 1.0, 0));
}

#[test]
fn draft_model_samples_the_target_distribution() {
    // The draft model samples its tokens from its own processed distribution q; acceptance
    // uses min(1, p/q) and rejections draw from the residual max(0, p - q).
    let mut d = ModelDrafter::new(Markov::new(3, 1.0));
    d.min_confidence = 0.0;
    check("draft model", &mut d, params(1.0, 0, 1.0, 0));
    check("draft model top-k/top-p", &mut d, params(0.7, 2, 0.9, 0));
    check_broken_fails("draft model", &mut d, params(1.0, 0, 1.0, 0));
}

/// A small grammar over the 3 tokens: the output starts with 1 or 2; 1 is always followed by
/// 0 (a forced token), 2 by 0 or 1, and 0 by 1 or 2.
#[derive(Default)]
struct SmallGrammar(Vec<u32>);

impl SmallGrammar {
    fn allowed(last: Option<u32>) -> &'static [u32] {
        match last {
            None | Some(0) => &[1, 2],
            Some(1) => &[0],
            _ => &[0, 1],
        }
    }
}

impl Constraint for SmallGrammar {
    fn mask(&mut self, allowed: &mut TokenSet) -> Result<(), ConstraintError> {
        *allowed = TokenSet::new(V);
        for &t in Self::allowed(self.0.last().copied()) {
            allowed.insert(t);
        }
        Ok(())
    }
    fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        if !Self::allowed(self.0.last().copied()).contains(&token) {
            return Err(ConstraintError(format!("token {token} is not allowed")));
        }
        self.0.push(token);
        Ok(())
    }
    fn allowed_prefix(&mut self, tokens: &[u32]) -> Result<usize, ConstraintError> {
        let mut last = self.0.last().copied();
        for (i, &t) in tokens.iter().enumerate() {
            if !Self::allowed(last).contains(&t) {
                return Ok(i);
            }
            last = Some(t);
        }
        Ok(tokens.len())
    }
    fn forced_tokens(&mut self) -> Vec<u32> {
        match self.0.last() {
            Some(1) => vec![0],
            _ => Vec::new(),
        }
    }
    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError> {
        let keep = self.0.len().saturating_sub(n);
        self.0.truncate(keep);
        Ok(())
    }
}

/// Exact probability of each continuation under the grammar: the target's distribution with
/// the forbidden tokens removed, then temperature, top-k and top-p.
fn exact_constrained(
    target: &Markov,
    prompt: &[u32],
    p: &SamplingParams,
) -> HashMap<Vec<u32>, f64> {
    let mut out = HashMap::new();
    for code in 0..V.pow(LEN as u32) {
        let seq: Vec<u32> = (0..LEN)
            .map(|i| ((code / V.pow(i as u32)) % V) as u32)
            .collect();
        let mut full = prompt.to_vec();
        let mut prob = 1.0f64;
        let mut last = None;
        for &t in &seq {
            let n = full.len();
            let mut row = target.row(full[n - 2], full[n - 1]).to_vec();
            for (i, l) in row.iter_mut().enumerate() {
                if !SmallGrammar::allowed(last).contains(&(i as u32)) {
                    *l = f32::NEG_INFINITY;
                }
            }
            let d = Distribution::new(&row, p).unwrap();
            prob *= d.probs[t as usize] as f64;
            full.push(t);
            last = Some(t);
        }
        out.insert(seq, prob);
    }
    out
}

fn check_constrained(name: &str, drafter: &mut dyn Drafter, p: SamplingParams) {
    let truth = exact_constrained(&Markov::new(1, 1.5), &[0, 1], &p);
    let mut target = Markov::new(1, 1.5);
    let mut counts = HashMap::new();
    let mut forced = 0;
    for seed in 0..DRAWS {
        let opts = GenerateOptions {
            max_tokens: LEN,
            sampling: SamplingParams { seed, ..p.clone() },
            depth: Depth::Fixed(5),
            rejection: Rejection::Residual,
            logits: Default::default(),
        };
        let mut grammar = SmallGrammar::default();
        let g = block_on(generate_constrained(
            &mut target,
            Some(&mut *drafter),
            &mut KvTokens::default(),
            &[0, 1],
            &opts,
            Some(&mut grammar as &mut dyn Constraint),
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ))
        .unwrap();
        forced += g
            .provenance
            .iter()
            .filter(|&&p| p == Provenance::Forced)
            .count();
        *counts.entry(g.tokens).or_insert(0) += 1;
    }
    let (stat, crit) = chi_square(&counts, &truth);
    eprintln!("{name} under a grammar {p:?}: chi2 {stat:.1} (critical {crit:.1}), {forced} forced");
    assert!(
        forced > 0,
        "{name}: the grammar's forced tokens were never drafted"
    );
    assert!(
        stat < crit,
        "{name}: constrained speculative sampling differs from the target: chi2 {stat:.1} >= {crit:.1}"
    );
}

#[test]
fn sampling_under_a_grammar_samples_the_masked_target_distribution() {
    check_constrained(
        "chain",
        &mut ChainGuess(Markov::new(2, 1.5)),
        params(1.0, 0, 1.0, 0),
    );
    check_constrained("tree", &mut TreeGuess, params(1.3, 2, 0.95, 0));
    let mut d = ModelDrafter::new(Markov::new(3, 1.0));
    d.min_confidence = 0.0;
    check_constrained("draft model", &mut d, params(1.0, 0, 1.0, 0));
    check_constrained("draft model top-k/top-p", &mut d, params(0.7, 2, 0.9, 0));
}
