//! Readers for the three prompt-set files that `scripts/fetch-prompts.sh` puts in `data/prompts/`.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::BenchError;

/// HumanEval, gzipped JSON lines (164 problems).
pub const HUMANEVAL_FILE: &str = "HumanEval.jsonl.gz";
/// MT-Bench first and second turns, JSON lines (80 questions, 10 per category).
pub const MTBENCH_FILE: &str = "mt_bench_question.jsonl";
/// ShareGPT V3: one JSON array, cut off in the middle of a record.
pub const SHAREGPT_FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HumanEvalProblem {
    pub task_id: String,
    /// Imports, signature and docstring: what a completion model continues.
    pub prompt: String,
    /// The body that follows `prompt`.
    pub canonical_solution: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MtBenchQuestion {
    pub question_id: u64,
    pub category: String,
    pub turns: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Conversation {
    pub id: String,
    pub conversations: Vec<Turn>,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Turn {
    /// "human" or "gpt" (a few records also have "system", "bing", ...).
    pub from: String,
    pub value: String,
}

fn open(path: &Path) -> Result<File, BenchError> {
    File::open(path).map_err(|source| match source.kind() {
        std::io::ErrorKind::NotFound => BenchError::MissingFile {
            path: path.to_owned(),
        },
        _ => BenchError::Io {
            path: path.to_owned(),
            source,
        },
    })
}

fn json_lines<T: for<'de> Deserialize<'de>>(
    path: &Path,
    reader: impl BufRead,
) -> Result<Vec<T>, BenchError> {
    let mut out = Vec::new();
    for (i, line) in reader.lines().enumerate() {
        let line = line.map_err(|source| BenchError::Io {
            path: path.to_owned(),
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let record = serde_json::from_str(&line).map_err(|e| BenchError::Malformed {
            path: path.to_owned(),
            record: i + 1,
            message: e.to_string(),
        })?;
        out.push(record);
    }
    Ok(out)
}

pub(crate) fn read_humaneval(path: &Path) -> Result<Vec<HumanEvalProblem>, BenchError> {
    let gz = flate2::read::GzDecoder::new(BufReader::new(open(path)?));
    json_lines(path, BufReader::new(gz))
}

pub(crate) fn read_mtbench(path: &Path) -> Result<Vec<MtBenchQuestion>, BenchError> {
    json_lines(path, BufReader::new(open(path)?))
}

/// Streams the records of a JSON array one at a time, so that a file cut off in the middle of a
/// record (as the ShareGPT release is) still yields every complete record before the cut.
/// A record that is malformed before the end of the file is an error; running out of bytes
/// inside a record ends the iteration.
pub(crate) struct ShareGptReader<R> {
    reader: R,
    path: PathBuf,
    /// Records yielded so far (for error messages).
    count: usize,
    state: State,
}

#[derive(PartialEq)]
enum State {
    Start,
    InArray,
    Done,
}

impl ShareGptReader<BufReader<File>> {
    pub(crate) fn open(path: &Path) -> Result<Self, BenchError> {
        Ok(Self::new(
            BufReader::with_capacity(1 << 20, open(path)?),
            path,
        ))
    }
}

impl<R: BufRead> ShareGptReader<R> {
    pub(crate) fn new(reader: R, path: &Path) -> Self {
        Self {
            reader,
            path: path.to_owned(),
            count: 0,
            state: State::Start,
        }
    }

    /// Consumes whitespace and any of `skip`; returns the next other byte without consuming it,
    /// or None at the end of the input.
    fn peek_past(&mut self, skip: &[u8]) -> Result<Option<u8>, BenchError> {
        loop {
            let buf = self.reader.fill_buf().map_err(|source| BenchError::Io {
                path: self.path.clone(),
                source,
            })?;
            if buf.is_empty() {
                return Ok(None);
            }
            match buf
                .iter()
                .position(|b| !b.is_ascii_whitespace() && !skip.contains(b))
            {
                Some(i) => {
                    let b = buf[i];
                    self.reader.consume(i);
                    return Ok(Some(b));
                }
                None => {
                    let n = buf.len();
                    self.reader.consume(n);
                }
            }
        }
    }

    fn malformed(&self, message: String) -> BenchError {
        BenchError::Malformed {
            path: self.path.clone(),
            record: self.count + 1,
            message,
        }
    }

    fn next_record(&mut self) -> Result<Option<Conversation>, BenchError> {
        if self.state == State::Start {
            match self.peek_past(&[])? {
                Some(b'[') => {
                    self.reader.consume(1);
                    self.state = State::InArray;
                }
                Some(b) => {
                    return Err(
                        self.malformed(format!("expected a JSON array, found '{}'", b as char))
                    )
                }
                None => return Ok(None), // empty file: no records
            }
        }
        if self.state == State::Done {
            return Ok(None);
        }
        match self.peek_past(b",")? {
            None | Some(b']') => return Ok(None),
            Some(_) => {}
        }
        // serde_json's reader consumes exactly the bytes of one value (up to its closing brace).
        let mut de = serde_json::Deserializer::from_reader(&mut self.reader);
        match Conversation::deserialize(&mut de) {
            Ok(record) => {
                self.count += 1;
                Ok(Some(record))
            }
            Err(e) if e.is_eof() => Ok(None), // the truncation point
            Err(e) => Err(self.malformed(e.to_string())),
        }
    }
}

impl<R: BufRead> Iterator for ShareGptReader<R> {
    type Item = Result<Conversation, BenchError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.next_record().transpose();
        if !matches!(item, Some(Ok(_))) {
            self.state = State::Done;
        }
        item
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv(id: &str, turns: &[(&str, &str)]) -> serde_json::Value {
        serde_json::json!({
            "id": id,
            "conversations": turns.iter().map(|(f, v)| serde_json::json!({"from": f, "value": v})).collect::<Vec<_>>(),
        })
    }

    fn read(bytes: &[u8]) -> Vec<Result<Conversation, BenchError>> {
        ShareGptReader::new(bytes, Path::new("mem.json")).collect()
    }

    #[test]
    fn sharegpt_reads_a_complete_array() {
        let all = serde_json::json!([
            conv("a", &[("human", "hi")]),
            conv("b", &[("gpt", "yo, \"q\" ]}")])
        ]);
        let text = serde_json::to_string_pretty(&all).unwrap();
        let got: Vec<_> = read(text.as_bytes())
            .into_iter()
            .map(|r| r.unwrap().id)
            .collect();
        assert_eq!(got, ["a", "b"]);
    }

    #[test]
    fn sharegpt_recovers_records_before_the_truncation() {
        let records = [
            conv("a", &[("human", "one"), ("gpt", "two")]),
            conv("b", &[("human", "three")]),
            conv("c", &[("human", "four"), ("gpt", "five \"and\" more")]),
        ]
        .map(|r| serde_json::to_string_pretty(&r).unwrap());
        let text = format!("[\n  {}\n]\n", records.join(",\n  "));
        let start_c = text.rfind(&records[2]).unwrap();
        let end_b = start_c - ",\n  ".len();
        // Cut anywhere from just after the second record to the last byte of the third.
        for cut in end_b..start_c + records[2].len() {
            let got: Vec<_> = read(&text.as_bytes()[..cut])
                .into_iter()
                .map(|r| r.unwrap().id)
                .collect();
            assert_eq!(got, ["a", "b"], "cut at byte {cut}");
        }
        let whole: Vec<_> = read(text.as_bytes())
            .into_iter()
            .map(|r| r.unwrap().id)
            .collect();
        assert_eq!(whole, ["a", "b", "c"]);
    }

    #[test]
    fn sharegpt_reports_malformed_records_before_the_end() {
        let text = br#"[{"id": "a", "conversations": []}, {"id": 7, "conversations": []}, {"id": "c", "conversations": []}]"#;
        let got = read(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap().id, "a");
        let err = got[1].as_ref().unwrap_err().to_string();
        assert!(err.contains("record 2"), "{err}");
        let err = read(b"{\"id\": 1}").pop().unwrap().unwrap_err().to_string();
        assert!(err.contains("expected a JSON array"), "{err}");
        assert!(read(b"").is_empty());
        assert!(read(b"[]").is_empty());
    }

    #[test]
    fn missing_file_is_a_typed_error() {
        let err = read_mtbench(Path::new("/nonexistent/mt_bench_question.jsonl")).unwrap_err();
        assert!(matches!(err, BenchError::MissingFile { .. }), "{err}");
        assert!(err.to_string().contains("scripts/fetch-prompts.sh"));
    }
}
