//! Structured output on real models: every output under a JSON schema parses and validates
//! (a small JSON Schema validator below covers the keywords the suite uses), greedy constrained
//! speculative decoding returns exactly what greedy constrained plain decoding returns for
//! every drafter on the CPU engine and the reference, and a bad schema or grammar is refused
//! before any token is generated.

use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;

use pollster::block_on;
use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_grammar::{Grammar, GrammarError, GrammarSpec, Vocabulary};
use runahead_model::{CpuModel, LanguageModel, Tokenizer};
use runahead_speculate::{
    generate_constrained, Constraint, Depth, Drafter, GenerateOptions, Generation, KvTokens,
    ModelDrafter, NgramDrafter, Provenance, SamplingParams, StopReason, SuffixDrafter,
};
use serde_json::Value;

const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
const QWEN: &str = "Qwen2.5-Coder-0.5B-Instruct.gguf";

fn model_path(name: &str) -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models")
        .join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: models/{name} is missing (scripts/setup.sh downloads it)");
        None
    }
}

struct Loaded {
    file: Arc<GgufFile>,
    tok: Tokenizer,
    vocab: Vocabulary,
}

fn load(name: &str) -> Option<Loaded> {
    let file = Arc::new(GgufFile::open(model_path(name)?).unwrap());
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let vocab = Vocabulary::new(&tok).unwrap();
    Some(Loaded { file, tok, vocab })
}

fn cpu(l: &Loaded) -> CpuEngine {
    let options = CpuOptions {
        context: Some(512),
        threads: Some(2),
        isa: None,
    };
    CpuEngine::load(l.file.clone(), &options).unwrap()
}

const TEXT: &str = "Ada Lovelace, born 10 December 1815 in London, was an English mathematician \
     who wrote the first computer program, for Charles Babbage's Analytical Engine. \
     She died at 36.";

/// The schemas of the suite: nested objects, arrays, enums, numbers, strings with patterns,
/// optional fields; bounded so that a few dozen tokens always complete them.
fn schemas() -> Vec<(&'static str, Value)> {
    let j = |s: &str| serde_json::from_str::<Value>(s).unwrap();
    vec![
        (
            "person",
            j(r#"{"type":"object","properties":{
                "name":{"type":"string","maxLength":24},
                "born":{"type":"integer","minimum":1000,"maximum":2100},
                "country":{"type":"string","enum":["England","France","Italy"]}},
              "required":["name","born","country"],"additionalProperties":false}"#),
        ),
        (
            "nested",
            j(r#"{"type":"object","properties":{
                "person":{"type":"object","properties":{
                    "name":{"type":"string","maxLength":20},
                    "age":{"type":"integer","minimum":0,"maximum":150}},
                  "required":["name","age"],"additionalProperties":false},
                "field":{"type":"string","maxLength":16}},
              "required":["person"],"additionalProperties":false}"#),
        ),
        (
            "array",
            j(r#"{"type":"object","properties":{
                "people":{"type":"array","items":{"type":"string","maxLength":16},
                          "minItems":1,"maxItems":2}},
              "required":["people"],"additionalProperties":false}"#),
        ),
        (
            "pattern",
            j(r#"{"type":"object","properties":{
                "date":{"type":"string","pattern":"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"},
                "score":{"type":"number","minimum":0,"maximum":10}},
              "required":["date","score"],"additionalProperties":false}"#),
        ),
        (
            "boolean",
            j(r#"{"type":"object","properties":{
                "mathematician":{"type":"boolean"},
                "kind":{"enum":["person","place",3]}},
              "required":["mathematician","kind"],"additionalProperties":false}"#),
        ),
    ]
}

fn prompt(l: &Loaded, schema: &Value) -> Vec<u32> {
    let text = format!("{TEXT}\n\nAnswer with JSON matching this schema: {schema}\nJSON: ");
    l.tok.encode(&text).unwrap()
}

fn greedy(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        max_tokens,
        sampling: SamplingParams::greedy(),
        depth: Depth::Fixed(6),
        ..GenerateOptions::default()
    }
}

fn run<M: LanguageModel>(
    m: &mut M,
    d: Option<&mut dyn Drafter>,
    tok: &Tokenizer,
    prompt: &[u32],
    opts: &GenerateOptions,
    grammar: &mut Grammar,
) -> Generation {
    block_on(generate_constrained(
        m,
        d,
        &mut KvTokens::default(),
        prompt,
        opts,
        Some(grammar as &mut dyn Constraint),
        |t| tok.is_end(t),
        |_, _| ControlFlow::Continue(()),
    ))
    .unwrap()
}

fn text(tok: &Tokenizer, g: &Generation) -> String {
    let kept: Vec<u32> = g
        .tokens
        .iter()
        .copied()
        .filter(|&t| !tok.is_end(t))
        .collect();
    tok.decode(&kept)
}

/// Checks `v` against `schema` for the keywords the suite uses; the error names the path.
fn validate(v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{at}: {what} ({v})"));
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            return fail("not in the enum");
        }
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let Some(obj) = v.as_object() else {
                return fail("not an object");
            };
            let props = schema.get("properties").and_then(Value::as_object);
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !obj.contains_key(r.as_str().unwrap_or_default()) {
                    return fail(&format!("missing {r}"));
                }
            }
            for (k, item) in obj {
                match props.and_then(|p| p.get(k)) {
                    Some(s) => validate(item, s, &format!("{at}.{k}"))?,
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        return fail(&format!("unexpected property {k}"))
                    }
                    None => {}
                }
            }
        }
        Some("array") => {
            let Some(items) = v.as_array() else {
                return fail("not an array");
            };
            let n = items.len() as u64;
            if schema
                .get("minItems")
                .and_then(Value::as_u64)
                .is_some_and(|m| n < m)
                || schema
                    .get("maxItems")
                    .and_then(Value::as_u64)
                    .is_some_and(|m| n > m)
            {
                return fail("wrong number of items");
            }
            if let Some(s) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate(item, s, &format!("{at}[{i}]"))?;
                }
            }
        }
        Some("string") => {
            let Some(s) = v.as_str() else {
                return fail("not a string");
            };
            if let Some(m) = schema.get("maxLength").and_then(Value::as_u64) {
                if s.chars().count() as u64 > m {
                    return fail("too long");
                }
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
                if !regex::Regex::new(p).unwrap().is_match(s) {
                    return fail("does not match the pattern");
                }
            }
        }
        Some(kind @ ("integer" | "number")) => {
            let Some(x) = v.as_f64() else {
                return fail("not a number");
            };
            if kind == "integer" && !(v.is_i64() || v.is_u64()) {
                return fail("not an integer");
            }
            if schema
                .get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| x < m)
                || schema
                    .get("maximum")
                    .and_then(Value::as_f64)
                    .is_some_and(|m| x > m)
            {
                return fail("out of range");
            }
        }
        Some("boolean") if !v.is_boolean() => return fail("not a boolean"),
        _ => {}
    }
    Ok(())
}

#[test]
fn the_validator_catches_what_it_checks() {
    let (_, person) = &schemas()[0];
    let ok = serde_json::json!({"name": "Ada", "born": 1815, "country": "England"});
    assert_eq!(validate(&ok, person, "$"), Ok(()));
    for bad in [
        serde_json::json!({"name": "Ada", "born": 1815}),
        serde_json::json!({"name": "Ada", "born": 99, "country": "England"}),
        serde_json::json!({"name": "Ada", "born": 1815, "country": "Spain"}),
        serde_json::json!({"name": "Ada", "born": 1815, "country": "England", "x": 1}),
    ] {
        assert!(validate(&bad, person, "$").is_err(), "{bad}");
    }
    let (_, pattern) = &schemas()[3];
    let bad = serde_json::json!({"date": "10 December", "score": 3});
    assert!(validate(&bad, pattern, "$").is_err());
}

/// Every output of every schema parses and validates, and ends the generation by itself.
fn conformance(name: &str) {
    let Some(l) = load(name) else { return };
    let mut m = cpu(&l);
    for (label, schema) in schemas() {
        let spec = GrammarSpec::JsonSchema(schema.to_string());
        let mut g = Grammar::new(&l.vocab, &spec).unwrap();
        let p = prompt(&l, &schema);
        let out = run(&mut m, None, &l.tok, &p, &greedy(64), &mut g);
        let text = text(&l.tok, &out);
        eprintln!("{name} {label}: {text}");
        assert_eq!(out.stop, StopReason::EndOfText, "{label}: {text}");
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{name} {label}: not JSON ({e}): {text}"));
        if let Err(e) = validate(&v, &schema, "$") {
            panic!("{name} {label}: {e}");
        }
    }
}

#[test]
fn json_schema_outputs_validate_on_smollm2() {
    conformance(SMOLLM2);
}

#[test]
fn json_schema_outputs_validate_on_qwen() {
    conformance(QWEN);
}

/// Greedy constrained output with each drafter equals plain constrained output.
fn speculative_equals_plain<M: LanguageModel>(l: &Loaded, m: &mut M, draft: Option<M>) {
    let (_, schema) = &schemas()[0];
    let p = prompt(l, schema);
    let spec = GrammarSpec::JsonSchema(schema.to_string());
    let opts = greedy(48);
    let plain = run(
        m,
        None,
        &l.tok,
        &p,
        &opts,
        &mut Grammar::new(&l.vocab, &spec).unwrap(),
    );
    assert!(plain.provenance.iter().all(|&p| p == Provenance::Target));
    let mut drafters: Vec<Box<dyn Drafter>> = vec![
        Box::new(NgramDrafter::default()),
        Box::new(SuffixDrafter::new(1 << 16)),
    ];
    if let Some(d) = draft {
        drafters.push(Box::new(ModelDrafter::new(d)));
    }
    for mut d in drafters {
        let name = d.name();
        let mut g = Grammar::new(&l.vocab, &spec).unwrap();
        let spec_out = run(m, Some(d.as_mut()), &l.tok, &p, &opts, &mut g);
        assert_eq!(spec_out.tokens, plain.tokens, "{name}");
        let forced = spec_out
            .provenance
            .iter()
            .filter(|&&p| p == Provenance::Forced)
            .count();
        assert!(forced > 0, "{name}: the schema's keys are forced tokens");
        assert!(
            spec_out.stats.target_forwards < plain.stats.target_forwards,
            "{name}: {} forwards, plain {}",
            spec_out.stats.target_forwards,
            plain.stats.target_forwards
        );
    }
}

#[test]
fn greedy_constrained_speculative_equals_plain_on_the_cpu_engine() {
    let Some(l) = load(SMOLLM2) else { return };
    let mut m = cpu(&l);
    let draft = cpu(&l);
    speculative_equals_plain(&l, &mut m, Some(draft));
}

#[test]
fn greedy_constrained_speculative_equals_plain_on_the_reference() {
    let Some(l) = load(SMOLLM2) else { return };
    let mut m = CpuModel::load(&l.file, Some(512)).unwrap();
    speculative_equals_plain(&l, &mut m, None);
}

#[test]
fn bad_schemas_and_grammars_are_refused_before_generation() {
    let Some(l) = load(SMOLLM2) else { return };
    let bad = |spec: GrammarSpec| Grammar::new(&l.vocab, &spec).err();
    assert!(matches!(
        bad(GrammarSpec::JsonSchema("{not json".into())),
        Some(GrammarError::SchemaJson(_))
    ));
    assert!(matches!(
        bad(GrammarSpec::JsonSchema("[1, 2]".into())),
        Some(GrammarError::Invalid(_))
    ));
    assert!(matches!(
        bad(GrammarSpec::JsonSchema(r#"{"type": "strin"}"#.into())),
        Some(GrammarError::Invalid(_))
    ));
    assert!(matches!(
        bad(GrammarSpec::Lark("start: ( \"a\"".into())),
        Some(GrammarError::Invalid(_))
    ));
    assert!(bad(GrammarSpec::Lark("start: \"yes\" | \"no\"".into())).is_none());
    assert!(bad(GrammarSpec::Regex("[0-9]{3}".into())).is_none());
    assert!(bad(GrammarSpec::JsonObject).is_none());
}

/// A Lark grammar and a regex constrain the whole output.
#[test]
fn lark_grammars_and_regexes_constrain_the_output() {
    let Some(l) = load(SMOLLM2) else { return };
    let mut m = cpu(&l);
    let p = l.tok.encode("Is the sky blue? Answer: ").unwrap();
    for (spec, check) in [
        (
            GrammarSpec::Lark("start: \"yes\" | \"no\"".into()),
            (|s: &str| s == "yes" || s == "no") as fn(&str) -> bool,
        ),
        (GrammarSpec::Regex("[0-9]{3}-[a-z]{2}".into()), |s: &str| {
            let b = s.as_bytes();
            b.len() == 6 && b[..3].iter().all(u8::is_ascii_digit) && b[3] == b'-'
        }),
    ] {
        let mut g = Grammar::new(&l.vocab, &spec).unwrap();
        let out = run(&mut m, None, &l.tok, &p, &greedy(16), &mut g);
        let t = text(&l.tok, &out);
        assert!(check(&t), "{spec:?}: {t:?}");
        assert_eq!(out.stop, StopReason::EndOfText);
    }
}
