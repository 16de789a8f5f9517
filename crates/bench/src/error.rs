//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong loading suites or writing reports. Messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The prompt directory does not exist.
    #[error("prompt data directory {dir} not found: run scripts/fetch-prompts.sh to download the prompt sets")]
    MissingData { dir: PathBuf },
    /// One data file is absent from an existing prompt directory.
    #[error("{path} not found: run scripts/fetch-prompts.sh to download the prompt sets")]
    MissingFile { path: PathBuf },
    #[error("reading {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record that does not parse (other than ShareGPT's truncated tail, which ends the file).
    #[error("{path}, record {record}: {message}")]
    Malformed {
        path: PathBuf,
        record: usize,
        message: String,
    },
    #[error("unknown suite '{name}' (known: {known})")]
    UnknownSuite { name: String, known: String },
    /// The data holds no prompt that fits the suite's selection rules.
    #[error("suite {suite}: no prompt in the data fits its selection rules")]
    EmptySuite { suite: String },
    #[error("nothing to report: no benchmark rows")]
    NoRows,
    #[error("writing plot {path}: {message}")]
    Plot { path: PathBuf, message: String },
}
