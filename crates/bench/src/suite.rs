//! The benchmark suites: which prompts, from which data, built how.
//!
//! Every suite is a fixed, deterministic selection (no RNG): the same data files and the same
//! `n` give the same prompts, and the prompts for a smaller `n` are a prefix of those for a
//! larger one (for a given data file). See the crate README for what each suite measures.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::data::{self, Conversation, HumanEvalProblem, MtBenchQuestion, ShareGptReader};
use crate::text::{self, CODE_WORDS, PROSE_WORDS};
use crate::BenchError;

/// What kind of work a suite asks for, which is what decides how much speculative decoding
/// (retrieval drafters above all) can gain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SuiteKind {
    /// The answer repeats or reworks text or code given in the prompt (summarize, extract,
    /// edit, answer over a document, revise an earlier turn).
    Grounded,
    /// Code written from a specification; repetitive but not copied from the prompt.
    Code,
    /// Open-ended writing or reasoning with little to copy.
    Open,
}

impl SuiteKind {
    pub const ALL: [SuiteKind; 3] = [SuiteKind::Grounded, SuiteKind::Code, SuiteKind::Open];

    pub fn as_str(self) -> &'static str {
        match self {
            SuiteKind::Grounded => "grounded",
            SuiteKind::Code => "code",
            SuiteKind::Open => "open",
        }
    }
}

impl std::fmt::Display for SuiteKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One prompt of a suite.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchPrompt {
    /// Stable identifier from the source data, e.g. `HumanEval/12`, `mtbench/81`,
    /// `sharegpt/QWJhYvA_0#1` (conversation id, message index).
    pub id: String,
    pub text: String,
    /// true: apply the model's chat template with `text` as one user message;
    /// false: raw completion of `text`.
    pub chat: bool,
}

/// A named set of prompts of one kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suite {
    pub name: String,
    pub kind: SuiteKind,
    pub prompts: Vec<BenchPrompt>,
}

/// Where `scripts/fetch-prompts.sh` puts the data, relative to the repository root.
pub const DEFAULT_PROMPTS_DIR: &str = "data/prompts";

/// The names of all suites, in report order: open and code first, input-grounded last.
pub const SUITE_NAMES: &[&str] = &[
    "humaneval",
    "mtbench-writing",
    "mtbench-roleplay",
    "mtbench-reasoning",
    "mtbench-math",
    "mtbench-coding",
    "mtbench-extraction",
    "mtbench-stem",
    "mtbench-humanities",
    "summarize",
    "extract",
    "qa-doc",
    "multi-turn",
    "edit-code",
    "docstring",
    "refactor",
];

/// Loads every suite in [`SUITE_NAMES`] order with up to `n_per_suite` prompts each (fewer where
/// the data has fewer: each MT-Bench category has 10). Each data file is read once.
pub fn all_suites(dir: &Path, n_per_suite: usize) -> Result<Vec<Suite>, BenchError> {
    let mut data = Data::new(dir)?;
    SUITE_NAMES
        .iter()
        .map(|name| data.suite(name, n_per_suite))
        .collect()
}

/// Loads one suite by name (see [`SUITE_NAMES`]), reading only the data file it needs.
pub fn load_suite(dir: &Path, name: &str, n: usize) -> Result<Suite, BenchError> {
    Data::new(dir)?.suite(name, n)
}

// --- selection -------------------------------------------------------------------------------

/// Spread strides: take every STRIDE-th eligible item so that a suite samples the whole data
/// set rather than its first records (HumanEval's first problems are its easiest).
const HUMANEVAL_STRIDE: usize = 3;
const SHAREGPT_STRIDE: usize = 4;

/// The ShareGPT-built suites share the conversations round-robin (record r goes to task
/// r mod 6), so no two suites use the same conversation. The discriminant is the task's index
/// in [`SHAREGPT_TASKS`] and in the pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ShareGptTask {
    Summarize,
    Extract,
    QaDoc,
    MultiTurn,
    Refactor,
    Docstring,
}

const SHAREGPT_TASKS: [ShareGptTask; 6] = [
    ShareGptTask::Summarize,
    ShareGptTask::Extract,
    ShareGptTask::QaDoc,
    ShareGptTask::MultiTurn,
    ShareGptTask::Refactor,
    ShareGptTask::Docstring,
];

/// Data files, read on first use and kept for the next suite.
struct Data {
    dir: PathBuf,
    humaneval: Option<Vec<HumanEvalProblem>>,
    mtbench: Option<Vec<MtBenchQuestion>>,
    /// Eligible prompts per ShareGPT task, in file order, and how many each pool was filled for.
    sharegpt: Option<(usize, [Vec<BenchPrompt>; 6])>,
}

impl Data {
    fn new(dir: &Path) -> Result<Self, BenchError> {
        if !dir.is_dir() {
            return Err(BenchError::MissingData {
                dir: dir.to_owned(),
            });
        }
        Ok(Self {
            dir: dir.to_owned(),
            humaneval: None,
            mtbench: None,
            sharegpt: None,
        })
    }

    fn humaneval(&mut self) -> Result<&[HumanEvalProblem], BenchError> {
        if self.humaneval.is_none() {
            self.humaneval = Some(data::read_humaneval(&self.dir.join(data::HUMANEVAL_FILE))?);
        }
        Ok(self.humaneval.as_deref().unwrap_or_default())
    }

    fn mtbench(&mut self) -> Result<&[MtBenchQuestion], BenchError> {
        if self.mtbench.is_none() {
            self.mtbench = Some(data::read_mtbench(&self.dir.join(data::MTBENCH_FILE))?);
        }
        Ok(self.mtbench.as_deref().unwrap_or_default())
    }

    /// The pool of `task`, scanned until every task has `n * SHAREGPT_STRIDE` eligible prompts
    /// or the file ends.
    fn sharegpt(&mut self, task: ShareGptTask, n: usize) -> Result<Vec<BenchPrompt>, BenchError> {
        let want = n.saturating_mul(SHAREGPT_STRIDE);
        if !matches!(&self.sharegpt, Some((filled, _)) if *filled >= want) {
            self.sharegpt = Some((
                want,
                scan_sharegpt(&self.dir.join(data::SHAREGPT_FILE), want)?,
            ));
        }
        let pool = match &self.sharegpt {
            Some((_, pools)) => pools[task as usize].iter().take(want).cloned().collect(),
            None => Vec::new(),
        };
        Ok(text::spread(pool, SHAREGPT_STRIDE, n))
    }

    fn suite(&mut self, name: &str, n: usize) -> Result<Suite, BenchError> {
        let (kind, prompts) = match name {
            "humaneval" => (
                SuiteKind::Code,
                self.humaneval()?
                    .iter()
                    .take(n)
                    .map(humaneval_prompt)
                    .collect(),
            ),
            "edit-code" => {
                let pool = eligible_code(self.humaneval()?)
                    .map(edit_code_prompt)
                    .collect();
                (SuiteKind::Grounded, text::spread(pool, HUMANEVAL_STRIDE, n))
            }
            "docstring" => (
                SuiteKind::Grounded,
                self.sharegpt(ShareGptTask::Docstring, n)?,
            ),
            "summarize" => (
                SuiteKind::Grounded,
                self.sharegpt(ShareGptTask::Summarize, n)?,
            ),
            "extract" => (
                SuiteKind::Grounded,
                self.sharegpt(ShareGptTask::Extract, n)?,
            ),
            "qa-doc" => (SuiteKind::Grounded, self.sharegpt(ShareGptTask::QaDoc, n)?),
            "multi-turn" => (
                SuiteKind::Grounded,
                self.sharegpt(ShareGptTask::MultiTurn, n)?,
            ),
            "refactor" => (
                SuiteKind::Grounded,
                self.sharegpt(ShareGptTask::Refactor, n)?,
            ),
            _ => match name
                .strip_prefix("mtbench-")
                .filter(|c| mtbench_kind(c).is_some())
            {
                Some(category) => {
                    let prompts = self
                        .mtbench()?
                        .iter()
                        .filter(|q| q.category == category)
                        .filter_map(mtbench_prompt)
                        .take(n)
                        .collect();
                    (mtbench_kind(category).unwrap_or(SuiteKind::Open), prompts)
                }
                None => {
                    return Err(BenchError::UnknownSuite {
                        name: name.to_owned(),
                        known: SUITE_NAMES.join(", "),
                    })
                }
            },
        };
        let suite = Suite {
            name: name.to_owned(),
            kind,
            prompts,
        };
        if suite.prompts.is_empty() && n > 0 {
            return Err(BenchError::EmptySuite { suite: suite.name });
        }
        Ok(suite)
    }
}

fn mtbench_kind(category: &str) -> Option<SuiteKind> {
    Some(match category {
        "writing" | "roleplay" | "reasoning" | "math" | "stem" | "humanities" => SuiteKind::Open,
        "coding" => SuiteKind::Code,
        "extraction" => SuiteKind::Grounded,
        _ => return None,
    })
}

// --- prompt builders -------------------------------------------------------------------------

/// HumanEval as published: the model continues the signature and docstring.
fn humaneval_prompt(p: &HumanEvalProblem) -> BenchPrompt {
    BenchPrompt {
        id: p.task_id.clone(),
        text: p.prompt.clone(),
        chat: false,
    }
}

/// MT-Bench first turn, as a chat message.
fn mtbench_prompt(q: &MtBenchQuestion) -> Option<BenchPrompt> {
    let first = q.turns.first()?;
    Some(BenchPrompt {
        id: format!("mtbench/{}", q.question_id),
        text: first.clone(),
        chat: true,
    })
}

/// Problems whose full function (prompt and canonical solution) is in [`CODE_WORDS`].
fn eligible_code(problems: &[HumanEvalProblem]) -> impl Iterator<Item = &HumanEvalProblem> {
    problems.iter().filter(|p| {
        CODE_WORDS.contains(&text::words(&format!(
            "{}{}",
            p.prompt, p.canonical_solution
        )))
    })
}

fn edit_code_prompt(p: &HumanEvalProblem) -> BenchPrompt {
    let code = format!("{}{}", p.prompt, p.canonical_solution);
    let text = format!(
        "Rewrite this Python function with descriptive variable names and complete type hints. \
         Keep its behaviour and its docstring unchanged. Output the full function.\n\n\
         ```python\n{}\n```",
        code.trim_end()
    );
    BenchPrompt {
        id: p.task_id.clone(),
        text,
        chat: true,
    }
}

/// Reads ShareGPT until each task's pool has `want` prompts (or the file ends). Record r is
/// offered to task r mod 6 only, and gives it at most one prompt.
fn scan_sharegpt(path: &Path, want: usize) -> Result<[Vec<BenchPrompt>; 6], BenchError> {
    let mut pools: [Vec<BenchPrompt>; 6] = Default::default();
    if want == 0 {
        return Ok(pools);
    }
    for (r, record) in ShareGptReader::open(path)?.enumerate() {
        let record = record?;
        let task = r % SHAREGPT_TASKS.len();
        if pools[task].len() < want {
            if let Some(prompt) = sharegpt_prompt(SHAREGPT_TASKS[task], &record) {
                pools[task].push(prompt);
            }
        }
        if pools.iter().all(|p| p.len() >= want) {
            break;
        }
    }
    Ok(pools)
}

fn sharegpt_prompt(task: ShareGptTask, c: &Conversation) -> Option<BenchPrompt> {
    let (message, text) = match task {
        ShareGptTask::Summarize => {
            let (i, doc) = prose_answer(c)?;
            (
                i,
                format!(
                "Summarize the following text in one short paragraph, then list its three to five \
                 most important points as bullet points.\n\nText:\n\"\"\"\n{doc}\n\"\"\""
            ),
            )
        }
        ShareGptTask::Extract => {
            let (i, doc) = prose_answer(c)?;
            (i, format!(
                "Extract the main claims of the text below as a JSON array. Each element is an \
                 object with a short \"claim\" field and a \"quote\" field holding the exact \
                 sentence from the text that states it, copied word for word.\n\nText:\n\"\"\"\n{doc}\n\"\"\""
            ))
        }
        ShareGptTask::QaDoc => {
            let (i, doc) = prose_answer(c)?;
            let topic = text::keyword(doc)?;
            (
                i,
                format!(
                    "Read the document below, then answer the question using only the document. \
                 First quote, word for word, every sentence of the document that is relevant, \
                 then give your answer.\n\nDocument:\n\"\"\"\n{doc}\n\"\"\"\n\n\
                 Question: What does the document say about \"{topic}\"?"
                ),
            )
        }
        ShareGptTask::MultiTurn => {
            let (last, transcript) = transcript(c)?;
            // Which revision: a fixed function of the conversation id, so it does not depend on
            // which other conversations were picked.
            let id_sum = c.id.bytes().map(usize::from).sum::<usize>();
            let request = REVISIONS[id_sum % REVISIONS.len()];
            (
                last,
                format!("Here is our conversation so far.\n\n{transcript}\n\n{request}"),
            )
        }
        ShareGptTask::Refactor => {
            let (i, tag, code) = code_answer(c)?;
            (
                i,
                format!(
                    "Refactor the following code for readability: use descriptive names, split \
                 long functions, remove duplication and add brief comments, without changing what \
                 it does. Output the complete refactored code.\n\n```{tag}\n{code}\n```"
                ),
            )
        }
        ShareGptTask::Docstring => {
            let (i, tag, code) = code_answer(c)?;
            (i, format!(
                "Document the following code: add a doc comment to every function, class \
                 and method, and a short comment above each step that is not obvious. Do not \
                 change the code itself. Output the full code with the comments.\n\n```{tag}\n{code}\n```"
            ))
        }
    };
    Some(BenchPrompt {
        id: format!("sharegpt/{}#{message}", c.id),
        text,
        chat: true,
    })
}

/// Requests that close a multi-turn prompt: each asks for the earlier
/// answer again, revised, so most of it can be copied.
const REVISIONS: &[&str] = &[
    "Please repeat your last answer, correcting any spelling or grammar mistakes but otherwise \
     keeping it exactly as it was.",
    "Rewrite your last answer in a more formal tone, keeping its structure and every one of its \
     points.",
    "Repeat your last answer in full, then add a one-sentence summary at the end.",
    "Revise your last answer so that it is easier for a beginner to follow: keep all of its \
     content and order, and rephrase only the sentences that use jargon.",
];

/// The first assistant answer whose first code block is in a language we name and
/// [`CODE_WORDS`] long, with its message index.
fn code_answer(c: &Conversation) -> Option<(usize, &'static str, &str)> {
    c.conversations.iter().enumerate().find_map(|(i, t)| {
        if t.from != "gpt" {
            return None;
        }
        let (lang, code) = text::first_code_block(&t.value)?;
        (CODE_WORDS.contains(&text::words(code)) && text::mostly_ascii(code))
            .then_some((i, lang, code))
    })
}

/// The first assistant answer that is an English prose document of [`PROSE_WORDS`] words
/// (paragraphs, no code blocks, not a refusal), with its message index.
fn prose_answer(c: &Conversation) -> Option<(usize, &str)> {
    c.conversations.iter().enumerate().find_map(|(i, t)| {
        let doc = t.value.trim();
        let ok = t.from == "gpt"
            && PROSE_WORDS.contains(&text::words(doc))
            && !doc.contains("```")
            && !doc.contains("As an AI")
            && text::is_prose(doc)
            && text::mostly_ascii(doc);
        ok.then_some((i, doc))
    })
}

/// The longest run of complete (user, assistant) exchanges from the start of the conversation
/// that fits in [`PROSE_WORDS`], as a labelled transcript; at least two exchanges, the last answer
/// at least 50 words. Returns the index of that last answer too.
fn transcript(c: &Conversation) -> Option<(usize, String)> {
    const MIN_LAST_ANSWER_WORDS: usize = 50;
    let turns = &c.conversations;
    let mut exchanges = 0;
    let mut total = 0;
    for pair in turns.chunks_exact(2) {
        let (user, assistant) = (&pair[0], &pair[1]);
        let ok = user.from == "human"
            && assistant.from == "gpt"
            && !user.value.trim().is_empty()
            && text::mostly_ascii(&user.value)
            && text::mostly_ascii(&assistant.value)
            && !assistant.value.contains("As an AI");
        let size = text::words(&user.value) + text::words(&assistant.value);
        if !ok || total + size > *PROSE_WORDS.end() {
            break;
        }
        total += size;
        exchanges += 1;
    }
    // Drop trailing exchanges whose answer is too short to be worth revising.
    while exchanges >= 2 && text::words(&turns[2 * exchanges - 1].value) < MIN_LAST_ANSWER_WORDS {
        total -= text::words(&turns[2 * exchanges - 2].value)
            + text::words(&turns[2 * exchanges - 1].value);
        exchanges -= 1;
    }
    if exchanges < 2 || !PROSE_WORDS.contains(&total) {
        return None;
    }
    let transcript = turns[..2 * exchanges]
        .iter()
        .map(|t| {
            format!(
                "{}:\n{}",
                if t.from == "human" { "User" } else { "You" },
                t.value.trim()
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n");
    Some((2 * exchanges - 1, transcript))
}
