//! Constrained decoding: a constraint (a grammar, a JSON schema) says which tokens may come
//! next. The generation loop applies its mask at every position it samples or verifies, checks
//! drafts against it before the verification forward, and proposes the tokens it forces as a
//! free draft (see docs/speculative.md, "Constrained decoding").

/// A set of token ids, one bit each (bit `i % 32` of word `i / 32`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenSet {
    words: Vec<u32>,
    len: usize,
}

impl TokenSet {
    /// The empty set over a vocabulary of `len` tokens.
    pub fn new(len: usize) -> Self {
        TokenSet {
            words: vec![0; len.div_ceil(32)],
            len,
        }
    }

    /// Vocabulary size.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    pub fn contains(&self, id: u32) -> bool {
        self.words
            .get(id as usize / 32)
            .is_some_and(|w| w >> (id % 32) & 1 == 1)
    }

    pub fn insert(&mut self, id: u32) {
        if let Some(w) = self.words.get_mut(id as usize / 32) {
            *w |= 1 << (id % 32);
        }
    }

    /// The words, for a constraint to fill in place.
    pub fn words_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }

    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Sets every logit of a token outside the set to minus infinity.
    pub fn apply(&self, logits: &mut [f32]) {
        for (i, l) in logits.iter_mut().enumerate() {
            if !self.contains(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
    }
}

/// A constraint failed: the grammar engine's own error, as text.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
#[error("grammar: {0}")]
pub struct ConstraintError(pub String);

/// What the generation loop needs of a constraint. The state is the tokens committed so far
/// (the generated tokens, in order).
pub trait Constraint {
    /// Writes the tokens allowed next into `allowed` (a set over the whole vocabulary). Once
    /// the constraint is complete the end tokens are allowed (and, when nothing may follow,
    /// only they are).
    fn mask(&mut self, allowed: &mut TokenSet) -> Result<(), ConstraintError>;

    /// Advances past `token`, which the last mask allowed.
    fn commit(&mut self, token: u32) -> Result<(), ConstraintError>;

    /// How many leading tokens of `tokens` the constraint allows in turn from the current
    /// state, which it leaves as it was.
    fn allowed_prefix(&mut self, tokens: &[u32]) -> Result<usize, ConstraintError>;

    /// Tokens that are the only continuation the constraint allows from here (e.g. `{"name": "`
    /// in a JSON schema), without committing them; empty when there is a choice.
    fn forced_tokens(&mut self) -> Vec<u32>;

    /// Takes back the last `n` committed tokens.
    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_sets_mask_logits() {
        let mut s = TokenSet::new(70);
        assert!(s.is_empty());
        s.insert(3);
        s.insert(64);
        s.insert(500); // outside the vocabulary: ignored
        assert!(s.contains(3) && s.contains(64) && !s.contains(4) && !s.contains(500));
        assert_eq!(s.count(), 2);
        let mut logits = vec![1.0f32; 70];
        s.apply(&mut logits);
        assert_eq!(logits[3], 1.0);
        assert_eq!(logits[0], f32::NEG_INFINITY);
        assert_eq!(logits.iter().filter(|l| l.is_finite()).count(), 2);
    }
}
