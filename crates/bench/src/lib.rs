//! Benchmark suites for speculative decoding, their reports and plots.
//!
//! - [`all_suites`] / [`load_suite`] build deterministic prompt suites from the prompt sets that
//!   `scripts/fetch-prompts.sh` downloads into `data/prompts/` (HumanEval, MT-Bench, ShareGPT):
//!   open-ended ones (MT-Bench writing, reasoning, ...), code generation (HumanEval) and
//!   input-grounded tasks built from the data (summarize, extract, answer over a document, revise
//!   an earlier turn, edit / document / refactor given code). Speculative decoding gains differ
//!   by kind, so every result is reported per suite and per [`SuiteKind`].
//! - [`BenchRow`] is one measured (suite, backend, drafter) result; [`markdown_table`],
//!   [`kind_summary`] / [`summary_table`] and [`plot_speedups`] turn rows into a report.
//!
//! The crate knows nothing about models or decoding: the caller runs the prompts and hands back
//! rows. See `crates/bench/README.md` for what each suite is and why it is there.

#![forbid(unsafe_code)]

mod data;
mod error;
mod plot;
mod report;
mod suite;
mod text;

pub use data::{HUMANEVAL_FILE, MTBENCH_FILE, SHAREGPT_FILE};
pub use error::BenchError;
pub use plot::plot_speedups;
pub use report::{kind_summary, markdown_table, summary_table, BenchRow, KindSummary};
pub use suite::{
    all_suites, load_suite, BenchPrompt, Suite, SuiteKind, DEFAULT_PROMPTS_DIR, SUITE_NAMES,
};
