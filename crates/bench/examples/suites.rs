//! Prints every suite built from the fetched prompt sets: prompt count and word-length range.
//!
//!   cargo run --release -p runahead-bench --example suites -- [DIR] [N] [--dump OUT.json]
//!
//! DIR defaults to data/prompts, N to 10. `--dump` also writes all suites as JSON.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dump = args
        .iter()
        .position(|a| a == "--dump")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let positional: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.starts_with("--") && (*i == 0 || args[i - 1] != "--dump"))
        .map(|(_, a)| a)
        .collect();
    let dir = PathBuf::from(
        positional
            .first()
            .map_or(runahead_bench::DEFAULT_PROMPTS_DIR, |s| s.as_str()),
    );
    let n: usize = positional.get(1).map_or(Ok(10), |s| s.parse())?;

    let start = std::time::Instant::now();
    let suites = runahead_bench::all_suites(&dir, n)?;
    println!(
        "loaded {} suites in {:.2}s",
        suites.len(),
        start.elapsed().as_secs_f64()
    );
    println!(
        "| suite | kind | prompts | words (min-max) | chat |\n| --- | --- | ---: | --- | --- |"
    );
    for s in &suites {
        let words: Vec<usize> = s
            .prompts
            .iter()
            .map(|p| p.text.split_whitespace().count())
            .collect();
        let (lo, hi) = (
            words.iter().min().unwrap_or(&0),
            words.iter().max().unwrap_or(&0),
        );
        let chat = s.prompts.first().is_some_and(|p| p.chat);
        println!(
            "| {} | {} | {} | {lo}-{hi} | {chat} |",
            s.name,
            s.kind,
            s.prompts.len()
        );
    }
    if let Some(out) = dump {
        std::fs::write(&out, serde_json::to_string_pretty(&suites)?)?;
        println!("wrote {out}");
    }
    Ok(())
}
