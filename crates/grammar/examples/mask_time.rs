//! Time per token of the grammar mask over a model's vocabulary: a JSON schema is walked token
//! by token along a fixed answer (at each position the longest allowed token that spells the
//! answer's next bytes), timing the mask of every position.
//!
//!   cargo run --release -p runahead-grammar --example mask_time -- models/Qwen2.5-Coder-0.5B-Instruct.gguf

use std::time::Instant;

use runahead_gguf::GgufFile;
use runahead_grammar::{Grammar, GrammarSpec, Vocabulary};
use runahead_model::Tokenizer;
use runahead_speculate::{Constraint, TokenSet};

const SCHEMA: &str = r#"{"type":"object","properties":{
    "name":{"type":"string"},
    "born":{"type":"integer"},
    "city":{"type":"string"},
    "field":{"type":"string","enum":["mathematics","physics","chemistry"]},
    "works":{"type":"array","items":{"type":"object","properties":{
        "title":{"type":"string"},"year":{"type":"integer"}},"required":["title","year"]}}},
  "required":["name","born","city","field","works"]}"#;

const ANSWER: &str = r#"{"name": "Ada Lovelace", "born": 1815, "city": "London", "field": "mathematics", "works": [{"title": "Notes on the Analytical Engine", "year": 1843}, {"title": "Sketch of the Analytical Engine", "year": 1842}]}"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: mask_time MODEL.gguf")?;
    let file = GgufFile::open(&path)?;
    let tok = Tokenizer::from_metadata(&file.header.metadata)?;
    let start = Instant::now();
    let vocab = Vocabulary::new(&tok)?;
    let vocab_ms = start.elapsed().as_secs_f64() * 1e3;
    let start = Instant::now();
    let mut g = Grammar::new(&vocab, &GrammarSpec::JsonSchema(SCHEMA.into()))?;
    let compile_ms = start.elapsed().as_secs_f64() * 1e3;

    let mut mask = TokenSet::new(vocab.size());
    let mut times = Vec::new();
    let mut rest = ANSWER.as_bytes();
    let mut tokens = 0;
    while !rest.is_empty() {
        let t0 = Instant::now();
        g.mask(&mut mask)?;
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        let best = (0..vocab.size() as u32)
            .filter(|&t| mask.contains(t) && !tok.token_bytes(t).is_empty())
            .filter(|&t| rest.starts_with(tok.token_bytes(t)))
            .max_by_key(|&t| tok.token_bytes(t).len())
            .ok_or("no allowed token spells the answer")?;
        g.commit(best)?;
        rest = &rest[tok.token_bytes(best).len()..];
        tokens += 1;
    }
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    println!(
        "{path}: vocabulary {} tokens (trie {vocab_ms:.0} ms), schema compiled in {compile_ms:.1} ms, \
         {tokens} tokens: mask mean {mean:.1} us, median {:.1} us, p90 {:.1} us, max {:.1} us",
        vocab.size(),
        times[times.len() / 2],
        times[times.len() * 9 / 10],
        times[times.len() - 1],
    );
    Ok(())
}
