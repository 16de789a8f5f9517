//! The generation loop natively on the reference CPU model: the drafters give the plain
//! tokens, stop strings, grammars, penalties and logprobs, cancelling, history and the cache.

use runahead_gguf::GgufFile;
use runahead_model::testing::TinyModel;
use runahead_model::CpuModel;

use super::draft_model_tests::drafters_with_draft_model;
use super::*;

#[derive(Debug)]
struct Run {
    out: Value,
    pieces: String,
    from_draft: usize,
}

fn tiny_file() -> GgufFile {
    GgufFile::from_bytes(TinyModel::llama().to_gguf()).expect("tiny GGUF")
}

fn tiny_tokenizer() -> Tokenizer {
    Tokenizer::from_metadata(&tiny_file().header.metadata).expect("tokenizer")
}

fn tokens(out: &Value) -> Vec<u32> {
    serde_json::from_value(out["tokens"].clone()).expect("token ids")
}

fn generate(draft: &str, stop_after: Option<usize>) -> Result<Run, WebError> {
    generate_with_drafters(draft, stop_after, &mut Drafters::default())
}

fn generate_with_drafters(
    draft: &str,
    stop_after: Option<usize>,
    drafters: &mut Drafters,
) -> Result<Run, WebError> {
    let file = tiny_file();
    let tokenizer = tiny_tokenizer();
    let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
    // A fixed depth: "auto" decides from timings, which would make the counts below vary.
    let opts = options::GenerateOptions {
        max_tokens: 24,
        draft: draft.into(),
        depth: DepthOption::Fixed(8),
        ..Default::default()
    };
    let prompt = [5, 77, 120, 3, 260, 5, 77, 120];
    let (mut pieces, mut from_draft, mut seen) = (String::new(), 0, 0);
    let on_piece = |text: &str, _: Option<u32>, draft: bool| {
        pieces.push_str(text);
        from_draft += draft as usize;
        seen += 1;
        match stop_after {
            Some(n) if seen >= n => ControlFlow::Break(()),
            _ => ControlFlow::Continue(()),
        }
    };
    let out = pollster::block_on(run(
        &mut model, &tokenizer, &prompt, &opts, drafters, "cpu", on_piece,
    ))?;
    Ok(Run {
        out,
        pieces,
        from_draft,
    })
}

#[test]
fn ngram_output_equals_plain_and_pieces_spell_the_text() {
    let plain = generate("none", None).expect("plain");
    let ngram = generate("ngram", None).expect("ngram");
    assert_eq!(ngram.out["tokens"], plain.out["tokens"]);
    assert_eq!(plain.out["stats"]["stop_reason"], "max_tokens");
    assert_eq!(ngram.pieces, plain.pieces);
    // The pieces are what a streaming decoder gives for the tokens (end tokens as "").
    let tokenizer = tiny_tokenizer();
    let mut decoder = tokenizer.decoder();
    let streamed: String = tokens(&plain.out)
        .into_iter()
        .map(|t| match tokenizer.is_end(t) {
            true => String::new(),
            false => decoder.push(t),
        })
        .collect();
    assert_eq!(plain.pieces, streamed);
    assert!(
        ngram.out["stats"]["drafted"].as_u64() > Some(0),
        "{}",
        ngram.out
    );
    // Tokens flagged as drafted are exactly the accepted draft tokens.
    assert_eq!(
        Some(ngram.from_draft as u64),
        ngram.out["stats"]["accepted"].as_u64()
    );
    assert_eq!(plain.from_draft, 0);
}

#[test]
fn every_drafter_and_depth_gives_the_plain_tokens() {
    let plain = generate("none", None).expect("plain");
    for draft in DRAFTERS {
        let (mut drafters, _) = drafters_with_draft_model();
        let run = generate_with_drafters(draft, None, &mut drafters).expect("speculative");
        assert_eq!(run.out["tokens"], plain.out["tokens"], "{draft}");
        assert_eq!(run.out["stats"]["draft"], *draft);
        let provenance = run.out["provenance"].as_array().expect("provenance");
        assert_eq!(provenance.len(), tokens(&run.out).len(), "{draft}");
    }
    let mut drafters = Drafters::default();
    for depth in [
        DepthOption::Fixed(1),
        DepthOption::Fixed(3),
        DepthOption::Named("auto".into()),
    ] {
        let file = tiny_file();
        let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
        let opts = options::GenerateOptions {
            max_tokens: 24,
            draft: "suffix".into(),
            depth,
            ..Default::default()
        };
        let out = pollster::block_on(run(
            &mut model,
            &tiny_tokenizer(),
            &[5, 77, 120, 3, 260, 5, 77, 120],
            &opts,
            &mut drafters,
            "cpu",
            |_, _, _| ControlFlow::Continue(()),
        ))
        .expect("fixed depth");
        assert_eq!(out["tokens"], plain.out["tokens"]);
    }
}

#[test]
fn drafters_remember_earlier_generations() {
    // The suffix drafter's global index holds the first answer, so asking again drafts
    // from it: more accepted tokens in fewer target forwards, and the same tokens.
    let mut drafters = Drafters::default();
    let first = generate_with_drafters("suffix", None, &mut drafters).expect("first");
    let again = generate_with_drafters("suffix", None, &mut drafters).expect("again");
    assert_eq!(again.out["tokens"], first.out["tokens"]);
    let stat = |r: &Run, k: &str| r.out["stats"][k].as_u64().expect("a count");
    assert!(
        stat(&again, "accepted") > stat(&first, "accepted"),
        "first {}\nagain {}",
        first.out["stats"],
        again.out["stats"]
    );
    assert!(stat(&again, "target_forwards") < stat(&first, "target_forwards"));
    // A fresh engine has not seen it.
    let fresh = generate("suffix", None).expect("fresh");
    assert_eq!(stat(&fresh, "accepted"), stat(&first, "accepted"));
}

#[test]
fn bad_depths_are_refused() {
    for depth in [DepthOption::Fixed(0), DepthOption::Named("deep".into())] {
        let opts = options::GenerateOptions {
            depth,
            ..Default::default()
        };
        let e = validate(&opts).unwrap_err();
        assert_eq!(e.code, Code::InvalidOption);
        assert!(e.message.contains("depth"), "{}", e.message);
    }
}

#[test]
fn stop_strings_end_the_text_for_every_drafter() {
    // The tiny model answers this prompt with "9" and then "$" over and over.
    let prompt = [85, 32, 69, 106, 53, 90, 37, 74, 111, 58];
    for draft in DRAFTERS {
        let file = tiny_file();
        let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
        let opts = options::GenerateOptions {
            max_tokens: 24,
            draft: draft.to_string(),
            depth: DepthOption::Fixed(4),
            stop: vec!["$$$$$".into()],
            ..Default::default()
        };
        let mut pieces = String::new();
        let out = pollster::block_on(run(
            &mut model,
            &tiny_tokenizer(),
            &prompt,
            &opts,
            &mut drafters_with_draft_model().0,
            "cpu",
            |text, _, _| {
                pieces.push_str(text);
                ControlFlow::Continue(())
            },
        ))
        .expect("generates");
        assert_eq!(out["stats"]["stop_reason"], "stop", "{draft}: {out}");
        assert_eq!(out["text"], "9", "{draft}");
        assert_eq!(pieces, "9", "{draft}");
        assert_eq!(tokens(&out).len(), 6, "{draft}");
    }
    let too_many = options::GenerateOptions {
        stop: vec!["x".into(); 17],
        ..Default::default()
    };
    assert_eq!(validate(&too_many).unwrap_err().code, Code::InvalidOption);
}

/// Under a grammar, every drafter gives the plain constrained tokens, the forced tokens
/// are free drafts, and the text matches the grammar.
#[test]
fn constrained_speculative_equals_constrained_plain() {
    let tokenizer = tiny_tokenizer();
    let vocab = runahead_grammar::Vocabulary::new(&tokenizer).expect("vocabulary");
    let spec = runahead_grammar::GrammarSpec::Regex("(ab[0-9]{2}, ){3}x".into());
    let constrained = |draft: &str| {
        let file = tiny_file();
        let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
        let mut grammar = runahead_grammar::Grammar::new(&vocab, &spec).expect("grammar");
        let opts = options::GenerateOptions {
            max_tokens: 24,
            draft: draft.into(),
            depth: DepthOption::Fixed(8),
            ..Default::default()
        };
        let constraint = Some(&mut grammar as &mut dyn Constraint);
        pollster::block_on(run_constrained(
            &mut model,
            &tokenizer,
            &[5, 77, 120, 3, 260, 5, 77, 120],
            &opts,
            constraint,
            &mut drafters_with_draft_model().0,
            "cpu",
            |_| ControlFlow::Continue(()),
        ))
        .expect("constrained generation")
    };
    let plain = constrained("none");
    let text = plain["text"].as_str().expect("text");
    let rx = "^(ab[0-9]{2}, ){3}x$";
    assert!(
        regex_lite_match(text),
        "{text:?} does not match {rx} ({plain})"
    );
    for draft in DRAFTERS {
        let run = constrained(draft);
        assert_eq!(run["tokens"], plain["tokens"], "{draft}");
        let forced = run["provenance"]
            .as_array()
            .expect("provenance")
            .iter()
            .filter(|p| *p == "forced")
            .count();
        if *draft != "none" {
            assert!(forced > 0, "{draft}: {run}");
        }
    }
}

/// Penalties and a bias give every drafter the plain tokens; logprobs come one per token
/// with their bytes and alternatives.
#[test]
fn penalties_and_logprobs_for_every_drafter() {
    let opts = |draft: &str| options::GenerateOptions {
        max_tokens: 24,
        draft: draft.into(),
        depth: DepthOption::Fixed(6),
        logprobs: true,
        top_logprobs: 2,
        frequency_penalty: 1.0,
        presence_penalty: 0.5,
        logit_bias: [("36".to_string(), 1.5)].into(),
        ..Default::default()
    };
    let file = tiny_file();
    let tokenizer = tiny_tokenizer();
    let generate = |draft: &str| {
        let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
        pollster::block_on(run(
            &mut model,
            &tokenizer,
            &[5, 77, 120, 3, 260, 5, 77, 120],
            &opts(draft),
            &mut drafters_with_draft_model().0,
            "cpu",
            |_, _, _| ControlFlow::Continue(()),
        ))
        .expect("generates")
    };
    let plain = generate("none");
    assert_ne!(plain["tokens"], generate_default_tokens());
    let logprobs = plain["logprobs"].as_array().expect("logprobs");
    assert_eq!(logprobs.len(), tokens(&plain).len());
    for (lp, t) in logprobs.iter().zip(tokens(&plain)) {
        assert_eq!(lp["token"], t);
        assert_eq!(lp["top_logprobs"].as_array().map(Vec::len), Some(2));
        assert_eq!(lp["bytes"], serde_json::json!(tokenizer.token_bytes(t)));
    }
    for draft in DRAFTERS {
        let run = generate(draft);
        assert_eq!(run["tokens"], plain["tokens"], "{draft}");
        assert_eq!(
            run["logprobs"].as_array().map(Vec::len),
            Some(logprobs.len())
        );
    }
}

fn generate_default_tokens() -> Value {
    generate("none", None).expect("plain").out["tokens"].clone()
}

/// `(ab[0-9]{2}, ){3}x`, checked by hand (no regex crate in this one's dependencies).
fn regex_lite_match(text: &str) -> bool {
    let Some(body) = text.strip_suffix('x') else {
        return false;
    };
    let parts: Vec<&str> = body.split(", ").collect();
    parts.len() == 4
        && parts[3].is_empty()
        && parts[..3].iter().all(|p| {
            p.len() == 4 && p.starts_with("ab") && p[2..].bytes().all(|b| b.is_ascii_digit())
        })
}

#[test]
fn break_from_the_callback_cancels() {
    let run = generate("none", Some(3)).expect("cancelled run");
    assert_eq!(run.out["stats"]["stop_reason"], "cancelled");
    assert_eq!(tokens(&run.out).len(), 3);
}

#[test]
fn unknown_drafters_are_refused_with_the_list() {
    let e = generate("model:draft.gguf", None).unwrap_err();
    assert_eq!(e.code, Code::InvalidOption);
    assert!(e.message.contains("none, ngram"), "{}", e.message);
}

#[test]
fn a_second_turn_on_the_same_model_reuses_the_cache() {
    let file = tiny_file();
    let tokenizer = tiny_tokenizer();
    let mut model = CpuModel::load(&file, Some(64)).expect("tiny model");
    let mut drafters = Drafters::default();
    let opts = options::GenerateOptions {
        max_tokens: 8,
        draft: "suffix".into(),
        depth: DepthOption::Fixed(4),
        ..Default::default()
    };
    let mut turn = |prompt: &[u32]| {
        let go = |_: &str, _: Option<u32>, _: bool| ControlFlow::Continue(());
        pollster::block_on(run(
            &mut model,
            &tokenizer,
            prompt,
            &opts,
            &mut drafters,
            "cpu",
            go,
        ))
        .expect("generates")
    };
    let first = [5, 77, 120, 3, 260, 5, 77, 120];
    let one = turn(&first);
    assert_eq!(one["stats"]["cached_tokens"], 0);
    let answer: Vec<u32> = serde_json::from_value(one["tokens"].clone()).expect("ids");
    let second: Vec<u32> = first
        .iter()
        .chain(&answer)
        .chain(&[9, 10])
        .copied()
        .collect();
    let two = turn(&second);
    assert_eq!(
        two["stats"]["cached_tokens"],
        first.len() + answer.len() - 1,
        "{}",
        two["stats"]
    );
    let mut fresh_model = CpuModel::load(&file, Some(64)).expect("tiny model");
    let go = |_: &str, _: Option<u32>, _: bool| ControlFlow::Continue(());
    let fresh = pollster::block_on(run(
        &mut fresh_model,
        &tokenizer,
        &second,
        &opts,
        &mut Drafters::default(),
        "cpu",
        go,
    ))
    .expect("fresh");
    assert_eq!(fresh["stats"]["cached_tokens"], 0);
    assert_eq!(two["tokens"], fresh["tokens"]);
}

/// A page's persisted history: the outputs of one engine's generations, exported and
/// imported into fresh drafters (a returning visitor), make the suffix drafter draft the
/// repeated answer from its first token; the text stays the same. A record is refused by
/// another tokenizer, and clearing forgets it.
#[test]
fn history_carries_earlier_outputs_to_new_drafters() {
    let vocab = tiny_tokenizer().vocab_size();
    let mut first = Drafters::default();
    let plain = generate_with_drafters("none", None, &mut first).expect("plain");
    let record = first.export_history(7);
    let mut restored = Drafters::default();
    assert_eq!(restored.import_history(&record, 7, vocab), Ok(1));
    let with = generate_with_drafters("suffix", None, &mut restored).expect("suffix");
    let without = generate_with_drafters("suffix", None, &mut Drafters::default()).expect("suffix");
    assert_eq!(with.out["tokens"], plain.out["tokens"]);
    assert_eq!(without.out["tokens"], plain.out["tokens"]);
    let accepted = |r: &Run| r.out["stats"]["accepted"].as_u64().unwrap_or(0);
    assert!(
        accepted(&with) > accepted(&without),
        "with history {} vs without {}",
        accepted(&with),
        accepted(&without)
    );
    assert!(Drafters::default()
        .import_history(&record, 8, vocab)
        .is_err());
    restored.clear_history();
    assert_eq!(
        restored.export_history(7),
        Drafters::default().export_history(7)
    );
}
