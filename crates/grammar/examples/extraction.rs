//! JSON extraction suite: structured answers from a given text under a JSON schema, greedy on
//! the CPU engine, constrained plain decoding against constrained speculative decoding (each
//! drafter), with tokens per target forward and tokens per second. Outputs must be equal.
//!
//!   cargo test -p runahead-grammar --no-run && target/debug/examples/extraction MODEL.gguf [THREADS]

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

/// (text, schema): each asks for fields the text states.
const TASKS: &[(&str, &str)] = &[
    (
        "Ada Lovelace (born 10 December 1815 in London, died 27 November 1852) was an English \
         mathematician and writer, chiefly known for her work on Charles Babbage's proposed \
         mechanical general-purpose computer, the Analytical Engine.",
        r#"{"type":"object","properties":{"name":{"type":"string"},"birth_year":{"type":"integer"},"death_year":{"type":"integer"},"birth_city":{"type":"string"},"nationality":{"type":"string"},"occupations":{"type":"array","items":{"type":"string"}}},"required":["name","birth_year","death_year","birth_city","nationality","occupations"],"additionalProperties":false}"#,
    ),
    (
        "Invoice 2024-0917 from Northwind Traders to Contoso Ltd: 12 boxes of green tea at 4.50 \
         each, 3 teapots at 19.99 each. Payment due by 15 October 2024. Total: 113.97 EUR.",
        r#"{"type":"object","properties":{"invoice_number":{"type":"string"},"seller":{"type":"string"},"buyer":{"type":"string"},"items":{"type":"array","items":{"type":"object","properties":{"description":{"type":"string"},"quantity":{"type":"integer"},"unit_price":{"type":"number"}},"required":["description","quantity","unit_price"],"additionalProperties":false}},"total":{"type":"number"},"currency":{"type":"string","enum":["EUR","USD","GBP"]}},"required":["invoice_number","seller","buyer","items","total","currency"],"additionalProperties":false}"#,
    ),
    (
        "The meeting with the design team is moved to Thursday at 3pm in room 4.12. Maria, Tom \
         and Priya will attend; Tom will present the new onboarding flow.",
        r#"{"type":"object","properties":{"event":{"type":"string"},"day":{"type":"string","enum":["Monday","Tuesday","Wednesday","Thursday","Friday"]},"time":{"type":"string"},"room":{"type":"string"},"attendees":{"type":"array","items":{"type":"string"}},"presenter":{"type":"string"}},"required":["event","day","time","room","attendees","presenter"],"additionalProperties":false}"#,
    ),
    (
        "Product review: The X200 headphones have great noise cancelling and a 30-hour battery, \
         but the ear cushions get warm. I'd give them 4 out of 5 stars. Price paid: $249.",
        r#"{"type":"object","properties":{"product":{"type":"string"},"rating":{"type":"integer","minimum":1,"maximum":5},"pros":{"type":"array","items":{"type":"string"}},"cons":{"type":"array","items":{"type":"string"}},"price_usd":{"type":"number"},"sentiment":{"type":"string","enum":["positive","mixed","negative"]}},"required":["product","rating","pros","cons","price_usd","sentiment"],"additionalProperties":false}"#,
    ),
];

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
    let prompts: Vec<Vec<u32>> = TASKS
        .iter()
        .map(|(text, schema)| {
            let user = format!(
                "Extract the information from this text as JSON matching the schema.\n\
                 Text: {text}\nSchema: {schema}"
            );
            let rendered = template.render_conversation(&[ChatMessage::new("user", &user)])?;
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
        for (i, ((_, schema), prompt)) in TASKS.iter().zip(&prompts).enumerate() {
            let mut g = Grammar::new(&vocab, &GrammarSpec::JsonSchema((*schema).into()))?;
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
             {forced} grammar-forced tokens, {}/{} drafted accepted",
            total.generated_tokens,
            total.tokens_per_forward(),
            total.tokens_per_second(),
            total.accepted,
            total.drafted,
        );
    }
    Ok(())
}
