//! Unit tests of the tokenizer on small vocabularies written here.

use runahead_gguf::{Array, GgufFile, GgufWriter, Value};

use super::*;
use crate::testing::TinyModel;

/// A tiny vocabulary whose merges reach "ab" + "c" but never "abc", which is a token of its
/// own, with a control and a user-defined token.
fn tiny(pre: &str) -> Tokenizer {
    let tokens = [
        "a", "b", "c", "ab", "abc", "<", "|", "x", ">", "<|x|>", "<x>",
    ];
    // Normal, but "<|x|>" control and "<x>" user-defined.
    let types = vec![1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 4];
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "gpt2")
        .meta_str("tokenizer.ggml.pre", pre)
        .meta_strings("tokenizer.ggml.tokens", &tokens)
        .meta_strings("tokenizer.ggml.merges", &["a b"])
        .meta("tokenizer.ggml.token_type", Value::Array(Array::I32(types)));
    let file = GgufFile::from_bytes(w.to_bytes()).unwrap();
    Tokenizer::from_metadata(&file.header.metadata).unwrap()
}

#[test]
fn llama3_takes_a_whole_pre_token_from_the_vocabulary() {
    assert_eq!(tiny("llama-bpe").encode("abc").unwrap(), [4]);
    assert_eq!(tiny("llama3").encode("abc").unwrap(), [4]);
    // Pre-tokenizers without ignore_merges only merge.
    assert_eq!(tiny("gpt-2").encode("abc").unwrap(), [3, 2]);
    assert_eq!(tiny("qwen2").encode("abc").unwrap(), [3, 2]);
    assert_eq!(tiny("smollm").encode("abc").unwrap(), [3, 2]);
}

#[test]
fn parse_special_off_tokenizes_control_text_as_text() {
    let mut tok = tiny("gpt-2");
    assert_eq!(tok.encode("<|x|><x>").unwrap(), [9, 10]);
    // As llama.cpp: control tokens become text, user-defined ones are still matched.
    tok.set_parse_special(false);
    assert_eq!(tok.encode("<|x|><x>").unwrap(), [5, 6, 7, 6, 8, 10]);
    tok.set_parse_special(true);
    assert_eq!(tok.encode("<|x|><x>").unwrap(), [9, 10]);
}

/// Found by fuzzing (fuzz/, target `tokenizer`): after an invalid byte, the streaming
/// decoder replaced the start of the next character too ("\u{fffd}\u{fffd}" where decode
/// gives "\u{fffd}€" for E1 E2 82 AC). Every sequence of three byte tokens drawn from
/// ASCII, continuation, lead and never-valid bytes must stream to exactly the text decode
/// gives.
#[test]
fn streaming_decode_equals_decode_after_invalid_bytes() {
    let file = GgufFile::from_bytes(TinyModel::llama().to_gguf()).unwrap();
    let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
    let id_of = |b: u8| {
        (0..tok.vocab_size() as u32)
            .find(|&id| tok.token_bytes(id) == [b])
            .unwrap()
    };
    let bytes = [0x41, 0x80, 0x82, 0xac, 0xbc, 0xc3, 0xe1, 0xe2, 0xf0, 0xff];
    let ids: Vec<u32> = bytes.iter().map(|&b| id_of(b)).collect();
    let stream = |seq: &[u32]| {
        let mut decoder = tok.decoder();
        let mut text: String = seq.iter().map(|&id| decoder.push(id)).collect();
        text.push_str(&decoder.finish());
        text
    };
    let mut sequences = vec![
        [0xe1, 0xe2, 0x82, 0xac].map(id_of).to_vec(),
        [0xff, 0xe2, 0x82, 0xac, 0x41].map(id_of).to_vec(),
    ];
    for &a in &ids {
        for &b in &ids {
            for &c in &ids {
                sequences.push(vec![a, b, c]);
            }
        }
    }
    for seq in &sequences {
        assert_eq!(stream(seq), tok.decode(seq), "{seq:?}");
    }
    assert_eq!(stream(&sequences[0]), "\u{fffd}€");
}

fn gguf(w: &GgufWriter) -> GgufFile {
    GgufFile::from_bytes(w.to_bytes()).unwrap()
}

fn types(t: &[i32]) -> Value {
    Value::Array(Array::I32(t.to_vec()))
}

fn floats(f: &[f32]) -> Value {
    Value::Array(Array::F32(f.to_vec()))
}

/// A small SentencePiece vocabulary: its tokens, scores and types, plus `extra` keys.
fn spm_writer(extra: &[(&str, Value)]) -> GgufWriter {
    let vocab: &[(&str, f32, i32)] = &[
        ("<unk>", 0.0, 2),
        ("<s>", 0.0, 3),
        ("</s>", 0.0, 3),
        ("\u{2581}", -3.0, 1),
        ("a", -4.0, 1),
        ("b", -4.0, 1),
        ("c", -4.0, 1),
        ("ab", -1.0, 1),
        ("bc", -0.5, 1),
        ("aa", -2.0, 1),
        ("\u{2581}a", -2.0, 1),
        ("<0xC3>", 0.0, 6),
        ("<0xA9>", 0.0, 6),
        ("<x>", 0.0, 4),
    ];
    let tokens: Vec<&str> = vocab.iter().map(|v| v.0).collect();
    let scores: Vec<f32> = vocab.iter().map(|v| v.1).collect();
    let kinds: Vec<i32> = vocab.iter().map(|v| v.2).collect();
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "llama")
        .meta_strings("tokenizer.ggml.tokens", &tokens)
        .meta("tokenizer.ggml.scores", floats(&scores))
        .meta("tokenizer.ggml.token_type", types(&kinds));
    for (k, v) in extra {
        w.meta(k, v.clone());
    }
    w
}

fn spm(extra: &[(&str, Value)]) -> Tokenizer {
    Tokenizer::from_metadata(&gguf(&spm_writer(extra)).header.metadata).unwrap()
}

#[test]
fn spm_merges_the_highest_scoring_pair_first() {
    let tok = spm(&[]);
    // llama.cpp's defaults for SentencePiece: BOS 1 added, a space prefixed.
    assert_eq!(
        (tok.bos, tok.eos, tok.add_bos, tok.add_eos),
        (Some(1), Some(2), true, false)
    );
    // "▁abc": "bc" (-0.5) beats "ab" (-1), then "▁a" (-2); "▁abc" is no token.
    assert_eq!(tok.encode("abc").unwrap(), [1, 10, 8]);
    // Equal scores: the leftmost pair first.
    let no_prefix = spm(&[("tokenizer.ggml.add_space_prefix", Value::Bool(false))]);
    assert_eq!(no_prefix.encode("aaa").unwrap(), [1, 9, 4]);
    assert_eq!(no_prefix.encode("abc").unwrap(), [1, 4, 8]);
}

#[test]
fn spm_spells_unknown_characters_with_byte_tokens() {
    let mut tok = spm(&[("tokenizer.ggml.add_bos_token", Value::Bool(false))]);
    assert!(!tok.add_bos);
    assert_eq!(tok.encode("é").unwrap(), [3, 11, 12]);
    // A character with no byte tokens is an error, not a panic.
    assert!(matches!(tok.encode("z"), Err(ModelError::Tokenizer(_))));
    // Special tokens: a space is prefixed after each one, as at the start.
    assert_eq!(tok.encode("a<s>a").unwrap(), [10, 1, 10]);
    tok.set_parse_special(false);
    // User-defined tokens are matched either way; control tokens only when parsing specials.
    assert_eq!(tok.encode("a<x>a").unwrap(), [10, 13, 10]);
    assert!(tok.encode("a<s>").is_err(), "'<', 's', '>' have no tokens");
}

#[test]
fn spm_decodes_spaces_bytes_and_drops_the_prefixed_space() {
    let tok = spm(&[]);
    for text in ["abc", " abc", "a bc é", "é a"] {
        let ids = tok.encode(text).unwrap();
        // The whole text, as llama.cpp's detokenizer gives it (BOS rendered as its text).
        assert_eq!(tok.detokenize(&ids[1..]), text, "{ids:?}");
        assert_eq!(tok.detokenize(&ids), format!("<s> {text}"), "{ids:?}");
    }
    // Generated tokens continue a text: their leading space is kept.
    assert_eq!(tok.decode(&[10, 8]), " abc");
    let mut decoder = tok.decoder();
    let streamed: String = [10, 11, 12].iter().map(|&id| decoder.push(id)).collect();
    assert_eq!(streamed + &decoder.finish(), " aé");
}

/// A small Gemma 4 vocabulary (BPE over raw UTF-8, `▁` for spaces).
fn gemma4(extra: &[(&str, Value)]) -> Tokenizer {
    let tokens = [
        "<pad>", "<eos>", "<bos>", "a", "b", "ab", "\u{2581}", "\n", "\n\n", "<0xC3>", "<0xA9>",
        "<turn|>",
    ];
    let kinds = [3, 3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 4];
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "gemma4")
        .meta_strings("tokenizer.ggml.tokens", &tokens)
        .meta_strings("tokenizer.ggml.merges", &["a b"])
        .meta("tokenizer.ggml.token_type", types(&kinds))
        .meta_u32("tokenizer.ggml.bos_token_id", 2)
        .meta_u32("tokenizer.ggml.eos_token_id", 1);
    for (k, v) in extra {
        w.meta(k, v.clone());
    }
    Tokenizer::from_metadata(&gguf(&w).header.metadata).unwrap()
}

#[test]
fn gemma4_always_adds_bos_and_keeps_newline_runs_whole() {
    let tok = gemma4(&[("tokenizer.ggml.add_bos_token", Value::Bool(false))]);
    // llama.cpp overrides Gemma 4's add_bos_token = false.
    assert!(tok.add_bos);
    // "\n\n" is a token no merge builds: taken whole; "\n\n\n" is not, so it is merged
    // (here: not at all).
    assert_eq!(tok.encode("ab a\n\n").unwrap(), [2, 5, 6, 3, 8]);
    assert_eq!(tok.encode("\n\n\n").unwrap(), [2, 7, 7, 7]);
    assert_eq!(tok.encode("é").unwrap(), [2, 9, 10]);
    assert_eq!(tok.detokenize(&[5, 6, 3, 8, 9, 10]), "ab a\n\né");
    // `<turn|>` ends a Gemma 4 turn.
    assert!(tok.is_end(11) && tok.is_end(1) && !tok.is_end(5));
}

/// A byte-level vocabulary with a BOS id, named `pre`, plus `extra` keys.
fn bpe_meta(pre: &str, extra: &[(&str, Value)]) -> GgufFile {
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "gpt2")
        .meta_str("tokenizer.ggml.pre", pre)
        .meta_strings("tokenizer.ggml.tokens", &["a", "b", "ab", "<s>"])
        .meta_strings("tokenizer.ggml.merges", &["a b"])
        .meta("tokenizer.ggml.token_type", types(&[1, 1, 1, 3]))
        .meta_u32("tokenizer.ggml.bos_token_id", 3);
    for (k, v) in extra {
        w.meta(k, v.clone());
    }
    gguf(&w)
}

#[test]
fn bos_follows_llama_cpp_when_the_file_does_not_say() {
    let add_bos = |pre: &str, extra: &[(&str, Value)]| {
        let tok = Tokenizer::from_metadata(&bpe_meta(pre, extra).header.metadata).unwrap();
        (tok.add_bos, tok.encode("ab").unwrap())
    };
    // llama.cpp adds a BOS for Llama 3's pre-tokenizer unless the file says not to.
    assert_eq!(add_bos("llama-bpe", &[]), (true, vec![3, 2]));
    assert_eq!(add_bos("llama3", &[]), (true, vec![3, 2]));
    let no = [("tokenizer.ggml.add_bos_token", Value::Bool(false))];
    assert_eq!(add_bos("llama-bpe", &no), (false, vec![2]));
    // ... and for the other byte-level ones only when the file asks.
    assert_eq!(add_bos("gpt-2", &[]), (false, vec![2]));
    assert_eq!(add_bos("qwen2", &[]), (false, vec![2]));
    let yes = [("tokenizer.ggml.add_bos_token", Value::Bool(true))];
    assert_eq!(add_bos("qwen2", &yes), (true, vec![3, 2]));
    // add_eos_token appends the EOS.
    let eos = [
        ("tokenizer.ggml.add_eos_token", Value::Bool(true)),
        ("tokenizer.ggml.eos_token_id", Value::U32(0)),
    ];
    assert_eq!(add_bos("gpt-2", &eos), (false, vec![2, 0]));
}

#[test]
fn a_rendered_prompt_gets_one_bos() {
    let tok = Tokenizer::from_metadata(&bpe_meta("llama-bpe", &[]).header.metadata).unwrap();
    assert_eq!(tok.encode("<s>ab").unwrap(), [3, 3, 2]);
    assert_eq!(tok.encode_rendered("<s>ab").unwrap(), [3, 2]);
    assert_eq!(tok.encode_rendered("ab").unwrap(), [3, 2]);
}

#[test]
fn malformed_vocabularies_are_refused_with_a_tokenizer_error() {
    let refused = |w: GgufWriter| match Tokenizer::from_metadata(&gguf(&w).header.metadata) {
        Err(ModelError::Tokenizer(msg)) => msg,
        Err(other) => panic!("not a tokenizer error: {other}"),
        Ok(_) => panic!("accepted"),
    };
    let without = |key: &str| {
        let mut w = GgufWriter::new();
        for (k, v) in gguf(&spm_writer(&[])).header.metadata.iter() {
            if k != key {
                w.meta(k, v.clone());
            }
        }
        w
    };
    assert!(refused(without("tokenizer.ggml.scores")).contains("scores"));
    let mut w = without("tokenizer.ggml.scores");
    w.meta("tokenizer.ggml.scores", floats(&[0.0; 3]));
    assert!(refused(w).contains("3 entries for 14 tokens"));
    let mut w = without("tokenizer.ggml.scores");
    w.meta("tokenizer.ggml.scores", floats(&[f32::NAN; 14]));
    assert!(refused(w).contains("score"));
    for bad in [7, -1] {
        let mut w = without("tokenizer.ggml.token_type");
        let mut kinds = [1; 14];
        kinds[5] = bad;
        w.meta("tokenizer.ggml.token_type", types(&kinds));
        assert!(refused(w).contains("token 5 has type"));
    }
    let mut w = without("tokenizer.ggml.token_type");
    w.meta("tokenizer.ggml.token_type", types(&[1; 13]));
    assert!(refused(w).contains("13 entries for 14 tokens"));
    let mut w = without("tokenizer.ggml.token_type");
    w.meta("tokenizer.ggml.token_type", floats(&[1.5; 14]));
    assert!(refused(w).contains("type"));
    let mut w = without("tokenizer.ggml.add_bos_token");
    w.meta_str("tokenizer.ggml.add_bos_token", "yes");
    assert!(refused(w).contains("not a boolean"));
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "gpt2")
        .meta_str("tokenizer.ggml.pre", "gpt-2")
        .meta_strings("tokenizer.ggml.tokens", &["a", "b"])
        .meta_strings("tokenizer.ggml.merges", &["ab"]);
    assert!(refused(w).contains("malformed merge"));
    let mut w = GgufWriter::new();
    w.meta_str("tokenizer.ggml.model", "t5")
        .meta_strings("tokenizer.ggml.tokens", &["a"]);
    assert!(refused(w).contains("'t5'"));
}
