//! Suites built from the committed prompt samples (tests/fixtures/prompts-sample) plus a
//! synthetic ShareGPT file written here, and, with `--ignored`, from the real data/prompts.

use std::path::{Path, PathBuf};

use runahead_bench::{
    all_suites, load_suite, BenchError, Suite, SuiteKind, SHAREGPT_FILE, SUITE_NAMES,
};
use serde_json::json;

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/prompts-sample")
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("runahead-bench-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// --- a synthetic ShareGPT file -----------------------------------------------------------------

const NOUNS: &[&str] = &[
    "garden", "river", "market", "library", "engine", "harbor", "orchard", "museum", "bridge",
    "forest", "station", "village", "kitchen", "theater", "factory", "valley",
];
const ADJECTIVES: &[&str] = &[
    "quiet", "busy", "ancient", "modern", "narrow", "bright", "hidden", "famous",
];
const VERBS: &[&str] = &[
    "shapes", "supports", "connects", "protects", "changes", "feeds", "attracts", "serves",
];

/// About `words` words of English-like prose in paragraphs of four sentences (12 words each).
fn prose(seed: usize, words: usize) -> String {
    let mut paragraphs = Vec::new();
    let mut sentences = Vec::new();
    for i in 0..words.div_ceil(12) {
        let k = seed * 7 + i;
        let (a, b) = (NOUNS[k % NOUNS.len()], NOUNS[(k * 3 + 1) % NOUNS.len()]);
        sentences.push(format!(
            "The {} {a} near the town {} the {b} that many of us see each year.",
            ADJECTIVES[k % ADJECTIVES.len()],
            VERBS[(k / 2) % VERBS.len()],
        ));
        if sentences.len() == 4 {
            paragraphs.push(sentences.join(" "));
            sentences.clear();
        }
    }
    if !sentences.is_empty() {
        paragraphs.push(sentences.join(" "));
    }
    paragraphs.join("\n\n")
}

/// About `words` words of Python in a fenced block tagged `tag`, inside an answer.
fn code_answer(seed: usize, words: usize, tag: &str) -> String {
    let body: Vec<String> = (0..words.div_ceil(6))
        .map(|i| format!("    total = total + values[{i}] * {}", seed + i))
        .collect();
    format!("Here is the code:\n\n```{tag}\ndef compute(values):\n    total = 0\n{}\n    return total\n```\n\nIt adds the weighted values.", body.join("\n"))
}

fn record(id: &str, turns: &[(&str, String)]) -> serde_json::Value {
    // "conversations" first: the text reads the same with serde_json's sorted maps and its
    // insertion-ordered ones (preserve_order, which llguidance turns on in a workspace build).
    json!({"conversations": turns.iter().map(|(f, v)| json!({"from": f, "value": v})).collect::<Vec<_>>(), "id": id})
}

/// 24 records, record r meant for task r mod 6 (summarize, extract, qa-doc, multi-turn,
/// refactor, docstring). Rounds 0, 2 and 3 are valid; round 1 is invalid for its task in a
/// different way each; the file is cut inside the last record.
fn sharegpt_text() -> String {
    let q = |s: &str| ("human", s.to_owned());
    let a = |s: String| ("gpt", s);
    let mut records = Vec::new();
    for round in 0..4 {
        for task in 0..6 {
            let r = round * 6 + task;
            let id = format!("syn-{r}");
            let valid = round != 1;
            let turns = match (task, valid) {
                (0..=2, true) => vec![q("Tell me about towns."), a(prose(r, 300))],
                (0, false) => vec![q("Short?"), a(prose(r, 100))],
                (1, false) => vec![
                    q("A poem?"),
                    a("Roses are red\nviolets are blue\n".repeat(60)),
                ],
                (2, false) => vec![
                    q("Chinese?"),
                    a("这是一个很长的中文段落，".repeat(40) + &prose(r, 160)),
                ],
                (3, true) => vec![
                    q("What is a town?"),
                    a(prose(r, 120)),
                    q("And what about its gardens and rivers?"),
                    a(prose(r + 1, 150)),
                    q("Thanks."),
                    a(prose(r + 2, 600)), // does not fit: the transcript keeps two exchanges
                ],
                (3, false) => vec![q("What is a town?"), a(prose(r, 300))],
                (4, true) => vec![q("Write code."), a(code_answer(r, 120, "python"))],
                (4, false) => vec![q("Write code."), a(code_answer(r, 120, "text"))],
                (5, true) => vec![q("Write code."), a(code_answer(r, 200, "py"))],
                (5, false) => vec![q("Write code."), a(code_answer(r, 800, "python"))],
                _ => unreachable!(),
            };
            records.push(record(&id, &turns));
        }
    }
    let text = serde_json::to_string_pretty(&records).unwrap();
    // Cut in the middle of the last record's code.
    // (Keys are sorted: "conversations" comes before "id".)
    let cut = text.rfind("values[10]").unwrap();
    assert!(text[cut..].contains("\"syn-23\"") && !text[cut..].contains("syn-22"));
    text[..cut].to_owned()
}

/// The committed samples plus the synthetic ShareGPT file, in a temp dir.
fn data_dir(name: &str) -> TempDir {
    let dir = TempDir::new(name);
    for file in [runahead_bench::HUMANEVAL_FILE, runahead_bench::MTBENCH_FILE] {
        std::fs::copy(sample_dir().join(file), dir.0.join(file)).unwrap();
    }
    std::fs::write(dir.0.join(SHAREGPT_FILE), sharegpt_text()).unwrap();
    dir
}

fn ids(suite: &Suite) -> Vec<&str> {
    suite.prompts.iter().map(|p| p.id.as_str()).collect()
}

fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

// --- tests ---------------------------------------------------------------------------------------

#[test]
fn all_suites_from_the_samples() {
    let dir = data_dir("all");
    let suites = all_suites(&dir.0, 10).unwrap();
    let names: Vec<&str> = suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, SUITE_NAMES);
    let get = |name: &str| suites.iter().find(|s| s.name == name).unwrap();

    let humaneval = get("humaneval");
    assert_eq!(humaneval.kind, SuiteKind::Code);
    assert_eq!(
        ids(humaneval),
        (0..10)
            .map(|i| format!("HumanEval/{i}"))
            .collect::<Vec<_>>()
    );
    assert!(humaneval
        .prompts
        .iter()
        .all(|p| !p.chat && p.text.trim_end().ends_with("\"\"\"")));

    for (category, kind) in [
        ("writing", SuiteKind::Open),
        ("roleplay", SuiteKind::Open),
        ("reasoning", SuiteKind::Open),
        ("math", SuiteKind::Open),
        ("coding", SuiteKind::Code),
        ("extraction", SuiteKind::Grounded),
        ("stem", SuiteKind::Open),
        ("humanities", SuiteKind::Open),
    ] {
        let suite = get(&format!("mtbench-{category}"));
        assert_eq!(suite.kind, kind, "{category}");
        assert_eq!(
            suite.prompts.len(),
            2,
            "the sample has two questions per category"
        );
        assert!(suite
            .prompts
            .iter()
            .all(|p| p.chat && p.id.starts_with("mtbench/")));
    }
    assert_eq!(ids(get("mtbench-writing")), ["mtbench/81", "mtbench/82"]);

    // The synthetic ShareGPT file: rounds 0, 2, 3 are valid, round 1 is not, record 23 is cut off.
    assert_eq!(
        ids(get("summarize")),
        ["sharegpt/syn-0#1", "sharegpt/syn-12#1", "sharegpt/syn-18#1"]
    );
    assert_eq!(
        ids(get("extract")),
        ["sharegpt/syn-1#1", "sharegpt/syn-13#1", "sharegpt/syn-19#1"]
    );
    assert_eq!(
        ids(get("qa-doc")),
        ["sharegpt/syn-2#1", "sharegpt/syn-14#1", "sharegpt/syn-20#1"]
    );
    assert_eq!(
        ids(get("multi-turn")),
        ["sharegpt/syn-3#3", "sharegpt/syn-15#3", "sharegpt/syn-21#3"]
    );
    assert_eq!(
        ids(get("refactor")),
        ["sharegpt/syn-4#1", "sharegpt/syn-16#1", "sharegpt/syn-22#1"]
    );
    assert_eq!(
        ids(get("docstring")),
        ["sharegpt/syn-5#1", "sharegpt/syn-17#1"]
    );
    // HumanEval/2 and /7 are under 50 words; the pick is spread with stride 3 over the rest.
    assert_eq!(
        ids(get("edit-code")),
        [
            "HumanEval/0",
            "HumanEval/4",
            "HumanEval/8",
            "HumanEval/11",
            "HumanEval/1",
            "HumanEval/5",
            "HumanEval/9",
            "HumanEval/3",
            "HumanEval/6",
            "HumanEval/10"
        ]
    );
    for name in [
        "summarize",
        "extract",
        "qa-doc",
        "multi-turn",
        "edit-code",
        "docstring",
        "refactor",
    ] {
        let suite = get(name);
        assert_eq!(suite.kind, SuiteKind::Grounded, "{name}");
        assert!(suite.prompts.iter().all(|p| p.chat), "{name}");
    }
}

#[test]
fn grounded_prompts_carry_their_source_within_bounds() {
    let dir = data_dir("bounds");
    for suite in all_suites(&dir.0, 10).unwrap() {
        for p in &suite.prompts {
            let n = words(&p.text);
            let (lo, hi) = match suite.name.as_str() {
                "summarize" | "extract" | "qa-doc" | "multi-turn" => (150, 700 + 80),
                "edit-code" | "docstring" | "refactor" => (50, 700 + 80),
                _ => (1, 700),
            };
            assert!((lo..=hi).contains(&n), "{} {}: {n} words", suite.name, p.id);
        }
    }
    let qa = load_suite(&dir.0, "qa-doc", 1).unwrap();
    let text = &qa.prompts[0].text;
    assert!(
        text.contains(&prose(2, 300)),
        "the document is given in full"
    );
    let topic = text
        .rsplit_once("Question: What does the document say about \"")
        .unwrap()
        .1;
    let topic = topic.strip_suffix("\"?").unwrap();
    let content = [NOUNS, ADJECTIVES, VERBS].concat();
    assert!(
        content.contains(&topic),
        "the topic is a content word of the document: {topic}"
    );
    let turn = load_suite(&dir.0, "multi-turn", 1).unwrap();
    let text = &turn.prompts[0].text;
    assert!(
        text.contains(&prose(3, 120))
            && text.contains(&prose(4, 150))
            && !text.contains(&prose(5, 600))
    );
    assert!(text.contains("User:\nAnd what about its gardens and rivers?\n\nYou:\n"));
    let refactor = load_suite(&dir.0, "refactor", 1).unwrap();
    assert!(refactor.prompts[0]
        .text
        .contains("```python\ndef compute(values):\n"));
    let docstring = load_suite(&dir.0, "docstring", 1).unwrap();
    assert!(
        docstring.prompts[0]
            .text
            .contains("```python\ndef compute(values):\n"),
        "py is normalised"
    );
}

#[test]
fn selection_is_deterministic_and_prefix_stable() {
    let dir = data_dir("determinism");
    let a = all_suites(&dir.0, 3).unwrap();
    let b = all_suites(&dir.0, 3).unwrap();
    assert_eq!(a, b);
    let small = all_suites(&dir.0, 2).unwrap();
    for (s, l) in small.iter().zip(&a) {
        assert_eq!(s.prompts[..], l.prompts[..s.prompts.len()], "{}", s.name);
    }
    // One suite on its own is the same as in the full load.
    for name in ["humaneval", "edit-code", "summarize", "mtbench-math"] {
        let alone = load_suite(&dir.0, name, 3).unwrap();
        assert_eq!(&alone, a.iter().find(|s| s.name == name).unwrap());
    }
    // No conversation is used by two ShareGPT suites.
    let mut seen: Vec<&str> = a
        .iter()
        .flat_map(|s| &s.prompts)
        .filter(|p| p.id.starts_with("sharegpt/"))
        .map(|p| p.id.split('#').next().unwrap())
        .collect();
    let total = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), total);
    assert!(all_suites(&dir.0, 0)
        .unwrap()
        .iter()
        .all(|s| s.prompts.is_empty()));
}

#[test]
fn errors_say_what_to_do() {
    let missing = Path::new("/nonexistent/data/prompts");
    let err = all_suites(missing, 10).unwrap_err();
    assert!(matches!(err, BenchError::MissingData { .. }), "{err}");
    assert!(
        err.to_string().contains("scripts/fetch-prompts.sh"),
        "{err}"
    );

    let dir = TempDir::new("partial");
    let err = load_suite(&dir.0, "summarize", 3).unwrap_err();
    assert!(
        matches!(&err, BenchError::MissingFile { path } if path.ends_with(SHAREGPT_FILE)),
        "{err}"
    );
    assert!(
        err.to_string().contains("scripts/fetch-prompts.sh"),
        "{err}"
    );

    let err = load_suite(&dir.0, "mtbench-poetry", 3).unwrap_err();
    assert!(matches!(err, BenchError::UnknownSuite { .. }), "{err}");
    assert!(
        err.to_string().contains("mtbench-writing"),
        "the message lists the known suites: {err}"
    );

    std::fs::write(
        dir.0.join(runahead_bench::MTBENCH_FILE),
        "{\"question_id\": 1, \"category\": \"math\", \"turns\": [\"1+1?\"]}\nnot json\n",
    )
    .unwrap();
    let err = load_suite(&dir.0, "mtbench-math", 3).unwrap_err();
    assert!(
        matches!(err, BenchError::Malformed { record: 2, .. }),
        "{err}"
    );

    std::fs::write(
        dir.0.join(runahead_bench::MTBENCH_FILE),
        "{\"question_id\": 1, \"category\": \"math\", \"turns\": [\"1+1?\"]}\n",
    )
    .unwrap();
    let err = load_suite(&dir.0, "mtbench-stem", 3).unwrap_err();
    assert!(matches!(err, BenchError::EmptySuite { .. }), "{err}");

    std::fs::write(dir.0.join(runahead_bench::HUMANEVAL_FILE), b"not gzip").unwrap();
    let err = load_suite(&dir.0, "humaneval", 3).unwrap_err();
    assert!(matches!(err, BenchError::Io { .. }), "{err}");
}

/// The real prompt sets: `scripts/fetch-prompts.sh`, then
/// `cargo test -p runahead-bench --test suites -- --ignored`.
#[test]
#[ignore = "needs data/prompts (scripts/fetch-prompts.sh)"]
fn real_prompt_sets() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/prompts");
    let suites = all_suites(&dir, 10).unwrap();
    assert_eq!(suites.len(), SUITE_NAMES.len());
    for suite in &suites {
        assert_eq!(suite.prompts.len(), 10, "{}", suite.name);
        for p in &suite.prompts {
            assert!(
                (1..=800).contains(&words(&p.text)),
                "{} {}",
                suite.name,
                p.id
            );
        }
    }
    assert_eq!(all_suites(&dir, 10).unwrap(), suites);
}
