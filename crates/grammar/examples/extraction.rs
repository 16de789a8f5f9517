//! JSON extraction suite: structured answers from a given text under a JSON schema, greedy on
//! the CPU engine, constrained plain decoding against constrained speculative decoding (each
//! drafter), with tokens per target forward and tokens per second. Outputs must be equal.
//!
//! The tasks are bench/extraction-tasks.json (the page's bench reads the same file).
//!
//!   cargo run --release -p runahead-grammar --example extraction -- MODEL.gguf [THREADS]

use std::ops::ControlFlow;
use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_grammar::{Grammar, GrammarSpec, Vocabulary};
use runahead_model::{ChatMessage, ChatTemplate, Tokenizer};
use runahead_speculate::{
    generate_constrained, Constraint, Depth, Drafter, GenerateOptions, KvTokens, NgramDrafter,
    SamplingParams, Stats, SuffixDrafter,
};
use serde_json::Value;

/// The suite's tasks, shared with the page's bench (bench/browser/extraction.mjs): an
/// instruction and, per task, a text and a schema asking for fields the text states.
const TASKS: &str = include_str!("../../../bench/extraction-tasks.json");

/// The prompt of one task, as the page's bench builds it.
fn task_prompt(
    instruction: &str,
    task: &Value,
) -> Result<(String, String), Box<dyn std::error::Error>> {
    let text = task["text"].as_str().ok_or("a task without a text")?;
    let schema = serde_json::to_string(&task["schema"])?;
    Ok((
        format!("{instruction}\nText: {text}\nSchema: {schema}"),
        schema,
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: extraction MODEL.gguf [THREADS]")?;
    let threads = args.next().map(|t| t.parse()).transpose()?;
    let file = Arc::new(GgufFile::open(&path)?);
    let tok = Tokenizer::from_metadata(&file.header.metadata)?;
    let source = file.header.metadata.str("tokenizer.chat_template")?;
    let template = ChatTemplate::for_tokenizer(source, &tok)?;
    let vocab = Vocabulary::new(&tok)?;
    let options = CpuOptions {
        context: Some(1024),
        threads,
        isa: None,
    };
    let mut model = CpuEngine::load(file.clone(), &options)?;
    let suite: Value = serde_json::from_str(TASKS)?;
    let instruction = suite["instruction"]
        .as_str()
        .ok_or("extraction-tasks.json: no instruction")?;
    let tasks = suite["tasks"]
        .as_array()
        .ok_or("extraction-tasks.json: no tasks")?
        .iter()
        .map(|task| task_prompt(instruction, task))
        .collect::<Result<Vec<_>, _>>()?;
    let prompts: Vec<Vec<u32>> = tasks
        .iter()
        .map(|(user, _)| {
            let rendered = template.render_conversation(&[ChatMessage::new("user", user)])?;
            Ok(tok.encode_rendered(&rendered)?)
        })
        .collect::<Result<_, Box<dyn std::error::Error>>>()?;
    let opts = GenerateOptions {
        max_tokens: 160,
        sampling: SamplingParams::greedy(),
        // Adaptive depth, as `runahead generate` uses by default; DEPTH=N verifies N nodes.
        depth: match std::env::var("DEPTH").ok().and_then(|d| d.parse().ok()) {
            Some(n) => Depth::Fixed(n),
            None => Depth::default(),
        },
        ..GenerateOptions::default()
    };
    let mut plain_outputs = Vec::new();
    for drafter in ["none", "ngram", "suffix"] {
        let mut total = Stats::default();
        for (i, ((_, schema), prompt)) in tasks.iter().zip(&prompts).enumerate() {
            let mut g = Grammar::new(&vocab, &GrammarSpec::JsonSchema(schema.clone()))?;
            let mut d: Option<Box<dyn Drafter>> = match drafter {
                "ngram" => Some(Box::new(NgramDrafter::default())),
                "suffix" => Some(Box::new(SuffixDrafter::new(1 << 16))),
                _ => None,
            };
            let out = block_on(generate_constrained(
                &mut model,
                d.as_deref_mut(),
                &mut KvTokens::default(),
                prompt,
                &opts,
                Some(&mut g as &mut dyn Constraint),
                |t| tok.is_end(t),
                |_, _| ControlFlow::Continue(()),
            ))?;
            if drafter == "none" {
                println!("  {}", tok.decode(&out.tokens).trim_end());
                plain_outputs.push(out.tokens.clone());
            } else if plain_outputs[i] != out.tokens {
                return Err(format!("{drafter}: task {i} differs from plain decoding").into());
            }
            total.add(&out.stats);
        }
        let forced = total
            .drafters
            .iter()
            .find(|d| d.name == "grammar")
            .map_or(0, |d| d.accepted);
        println!(
            "{path} draft {drafter:6}: {} tokens, {:.2} tokens/forward, {:.1} tokens/s, \
             {forced} grammar-forced tokens, {}/{} drafted accepted, {:.1} us per mask",
            total.generated_tokens,
            total.tokens_per_forward(),
            total.tokens_per_second(),
            total.accepted,
            total.drafted,
            total.mean_mask_seconds() * 1e6,
        );
    }
    Ok(())
}
