//! Structured output: a JSON schema, a Lark grammar or a regex, compiled by llguidance over the
//! model's vocabulary (a token trie of each token's bytes), as a
//! [`runahead_speculate::Constraint`] for the decoding loop.
//!
//! Build a [`Vocabulary`] once per tokenizer (the trie over every token), then a [`Grammar`]
//! per generation from a [`GrammarSpec`]. A bad schema or grammar is a [`GrammarError`] at
//! [`Grammar::new`], before any token is generated.

#![forbid(unsafe_code)]

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{TokEnv, TokRxInfo, TokTrie, TokenizerEnv};
use llguidance::{JsonCompileOptions, Matcher, ParserFactory};
use runahead_model::Tokenizer;
use runahead_speculate::{Constraint, ConstraintError, TokenSet};

/// What a generation's output must match.
#[derive(Clone, Debug, PartialEq)]
pub enum GrammarSpec {
    /// Any JSON object (OpenAI's `response_format: {type: "json_object"}`).
    JsonObject,
    /// A JSON Schema, as JSON text.
    JsonSchema(String),
    /// A grammar in llguidance's Lark syntax (`start: ...`; regexes as `/.../` terminals,
    /// `%json {...}` for a schema inside a grammar).
    Lark(String),
    /// A regular expression the whole output must match (Rust `regex` syntax).
    Regex(String),
}

/// A schema or grammar that cannot be used, or a vocabulary llguidance cannot work over.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum GrammarError {
    #[error("the JSON schema is not valid JSON: {0}")]
    SchemaJson(String),
    #[error("invalid grammar: {0}")]
    Invalid(String),
    #[error("the vocabulary cannot be constrained: {0}")]
    Vocabulary(String),
}

/// The model's vocabulary as llguidance sees it: each token's bytes in a trie, control tokens
/// marked so no grammar spells them, and the end tokens as its end-of-sequence set.
#[derive(Clone)]
pub struct Vocabulary {
    factory: Arc<ParserFactory>,
    size: usize,
}

/// A tokenizer environment over the trie alone: llguidance tokenizes the bytes a grammar forces
/// greedily over the trie. The forced tokens it yields are drafts the target verifies, so a
/// split the model would not choose costs acceptance, never correctness.
struct TrieEnv {
    trie: TokTrie,
}

impl TokenizerEnv for TrieEnv {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<u32> {
        self.trie.greedy_tokenize(s)
    }
}

impl Vocabulary {
    pub fn new(tokenizer: &Tokenizer) -> Result<Self, GrammarError> {
        let size = tokenizer.vocab_size();
        let n = u32::try_from(size).map_err(|_| GrammarError::Vocabulary("too large".into()))?;
        let mut words = Vec::with_capacity(size);
        let mut ends = Vec::new();
        for id in 0..n {
            let bytes = tokenizer.token_bytes(id);
            if tokenizer.is_end(id) {
                ends.push(id);
            }
            if tokenizer.is_special(id) || tokenizer.is_end(id) {
                // llguidance's marker for a special token: never matched as text.
                let mut w = Vec::with_capacity(bytes.len() + 1);
                w.push(TokTrie::SPECIAL_TOKEN_MARKER);
                w.extend_from_slice(bytes);
                words.push(w);
            } else {
                words.push(bytes.to_vec());
            }
        }
        let Some(&eos) = ends.first() else {
            return Err(GrammarError::Vocabulary(
                "the model has no end-of-text token".into(),
            ));
        };
        let mut info = TokRxInfo::new(n, eos);
        info.tok_bos = tokenizer.bos;
        info.tok_end_of_turn = tokenizer.eot;
        let trie = TokTrie::from(&info, &words).with_eos_tokens(&ends);
        let env: TokEnv = Arc::new(TrieEnv { trie });
        let mut factory =
            ParserFactory::new_simple(&env).map_err(|e| GrammarError::Vocabulary(e.to_string()))?;
        factory.quiet();
        Ok(Vocabulary {
            factory: Arc::new(factory),
            size,
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }
}

/// JSON under a schema is written in one layout, `{"a": 1, "b": [2, 3]}` (Python's
/// `json.dumps`), with no other whitespace: keys and separators are then the only continuation
/// and are forced tokens, free drafts. A schema's own `x-guidance` options take precedence.
fn json_layout(mut schema: serde_json::Value) -> serde_json::Value {
    if schema.get("x-guidance").is_none() && schema.is_object() {
        let options = JsonCompileOptions {
            item_separator: ", ".into(),
            key_separator: ": ".into(),
            whitespace_flexible: false,
            ..JsonCompileOptions::default()
        };
        options.apply_to(&mut schema);
    }
    schema
}

/// A compiled schema or grammar and its state in one generation.
pub struct Grammar {
    matcher: Matcher,
    size: usize,
}

impl Grammar {
    /// Compiles `spec` over `vocab`; errors say what is wrong with the schema or grammar.
    pub fn new(vocab: &Vocabulary, spec: &GrammarSpec) -> Result<Self, GrammarError> {
        let top = match spec {
            GrammarSpec::JsonObject => TopLevelGrammar::from_json_schema(json_layout(
                serde_json::json!({"type": "object"}),
            )),
            GrammarSpec::JsonSchema(text) => {
                let schema: serde_json::Value = serde_json::from_str(text)
                    .map_err(|e| GrammarError::SchemaJson(e.to_string()))?;
                if !schema.is_object() && !schema.is_boolean() {
                    return Err(GrammarError::Invalid(
                        "a JSON schema is an object (or true / false)".into(),
                    ));
                }
                TopLevelGrammar::from_json_schema(json_layout(schema))
            }
            GrammarSpec::Lark(text) => TopLevelGrammar::from_lark(text.clone()),
            GrammarSpec::Regex(rx) => TopLevelGrammar::from_regex(rx),
        };
        let parser = vocab
            .factory
            .create_parser(top)
            .map_err(|e| GrammarError::Invalid(e.to_string()))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(GrammarError::Invalid(e));
        }
        Ok(Grammar {
            matcher,
            size: vocab.size,
        })
    }

    /// Whether the output so far is complete under the grammar (the end token is allowed).
    pub fn is_accepting(&mut self) -> bool {
        self.matcher.is_accepting().unwrap_or(false)
    }

    fn error(&self) -> ConstraintError {
        ConstraintError(
            self.matcher
                .get_error()
                .unwrap_or_else(|| "the grammar engine failed".into()),
        )
    }
}

impl Constraint for Grammar {
    fn mask(&mut self, allowed: &mut TokenSet) -> Result<(), ConstraintError> {
        let vob = self
            .matcher
            .compute_mask_or_eos()
            .map_err(|e| ConstraintError(e.to_string()))?;
        if allowed.len() != self.size {
            *allowed = TokenSet::new(self.size);
        }
        let src = vob.as_slice();
        for (i, w) in allowed.words_mut().iter_mut().enumerate() {
            *w = src.get(i).copied().unwrap_or(0);
        }
        Ok(())
    }

    fn commit(&mut self, token: u32) -> Result<(), ConstraintError> {
        if self.matcher.is_stopped() {
            // Complete: only an end token was allowed, and it ends the generation.
            return Ok(());
        }
        self.matcher.consume_token(token).map_err(|_| self.error())
    }

    fn allowed_prefix(&mut self, tokens: &[u32]) -> Result<usize, ConstraintError> {
        if self.matcher.is_stopped() {
            return Ok(0);
        }
        self.matcher
            .validate_tokens(tokens)
            .map_err(|e| ConstraintError(e.to_string()))
    }

    fn forced_tokens(&mut self) -> Vec<u32> {
        if self.matcher.is_stopped() {
            return Vec::new();
        }
        self.matcher.compute_ff_tokens()
    }

    fn rollback(&mut self, n: usize) -> Result<(), ConstraintError> {
        self.matcher.rollback(n).map_err(|_| self.error())
    }
}
