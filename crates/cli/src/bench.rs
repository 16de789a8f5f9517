//! `runahead bench`: plain-decoding speed of each backend on the same prompts, measured in one
//! run so that ratios are meaningful on a noisy machine. Writes a markdown table (and JSON).

use std::fmt::Write as _;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use runahead_gguf::GgufFile;
use runahead_gpu::{GpuModel, HostCost};
use runahead_model::{Batch, CpuModel, LanguageModel, Tokenizer};
use runahead_speculate::{generate, GenerateOptions, SamplingParams, Stats};
use serde_json::json;

/// Prompts of the plain-decoding suite: prose, code, a list, a question.
const PROMPTS: [&str; 4] = [
    "Once upon a time, in a small village by the sea,",
    "def quicksort(xs):\n",
    "Here is a list of the planets of the solar system:\n1.",
    "Question: Why do leaves change color in autumn?\nAnswer:",
];

#[derive(clap::Args)]
pub struct BenchArgs {
    #[arg(long)]
    model: PathBuf,
    /// Comma-separated backends to measure: cpu, reference (the f32 oracle), gpu.
    #[arg(long, default_value = "cpu,gpu")]
    backends: String,
    /// Threads of the cpu backend (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Tokens generated per prompt (greedy).
    #[arg(long, default_value_t = 32)]
    max_tokens: usize,
    /// How many of the suite's prompts to run.
    #[arg(long, default_value_t = PROMPTS.len())]
    prompts: usize,
    /// Also write the results as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// KV cache size for the speculative suites.
    #[arg(long, default_value_t = 2048)]
    context: usize,
    /// With --suites: speculative vs plain decoding on prompt suites (see spec_bench).
    #[command(flatten)]
    suites: crate::spec_bench::SuiteArgs,
    /// Also time one forward of a block of each of these sizes (comma-separated, e.g.
    /// 1,2,4,8,16) after the first prompt, with logits for every row, as verification does,
    /// and with the last row's only, as a prompt's prefill does.
    #[arg(long, value_delimiter = ',')]
    block_sizes: Vec<usize>,
    /// Timed forwards per block size (the best counts: these machines are noisy).
    #[arg(long, default_value_t = 3)]
    block_reps: usize,
    /// Which GPU kernels the gpu backend runs.
    #[arg(long, value_enum, default_value_t = crate::GpuKernels::Auto)]
    gpu_kernels: crate::GpuKernels,
    /// Rows of the verification block whose per-forward host cost the gpu backend reports
    /// (next to a decoding forward of 1 row).
    #[arg(long, default_value_t = 8)]
    verify_block: usize,
    /// Forwards per size timed for the gpu backend's host cost (the median counts).
    #[arg(long, default_value_t = 10)]
    host_reps: usize,
    /// Also time each dispatch of a gpu decoding forward alone (the device polled idle before
    /// and after it, 3 runs in one submit; host clock: timestamp queries are not used yet) and
    /// report the time per kernel.
    #[arg(long)]
    profile: bool,
}

/// One kernel of the gpu profile: every dispatch with the same label, summed.
struct KernelTime {
    label: String,
    count: usize,
    /// Host clock (submit to idle), summed over the dispatches.
    ms: f64,
    /// Device timestamps, summed; `None` where the device has no timestamp queries.
    device_ms: Option<f64>,
}

struct Row {
    backend: String,
    detail: String,
    totals: Stats,
    dispatches_per_forward: Option<usize>,
    /// Milliseconds per forward of each of `--block-sizes`, logits for every row.
    block_ms: Vec<f64>,
    /// The same with logits for the last row only (prefill).
    prefill_ms: Vec<f64>,
    /// The gpu backend's host cost per forward: decoding (1 row), then `--verify-block` rows.
    host: Vec<HostCost>,
    /// `--profile`: the gpu backend's decoding forward per kernel, most time first.
    profile: Vec<KernelTime>,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if args.suites.suites.is_some() {
        return crate::spec_bench::run(
            &args.model,
            &args.backends,
            args.threads,
            args.max_tokens,
            args.context,
            args.gpu_kernels,
            &args.suites,
        );
    }
    let file = GgufFile::open(&args.model)
        .with_context(|| format!("cannot load {}", args.model.display()))?;
    let file = std::sync::Arc::new(file);
    let tok = Tokenizer::from_metadata(&file.header.metadata)?;
    let prompts: Vec<Vec<u32>> = PROMPTS
        .iter()
        .take(args.prompts.clamp(1, PROMPTS.len()))
        .map(|p| tok.encode(p))
        .collect::<Result<_, _>>()?;
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        sampling: SamplingParams::greedy(),
        ..GenerateOptions::default()
    };
    let mut rows = Vec::new();
    let mut outputs: Vec<Vec<Vec<u32>>> = Vec::new();
    for backend in args.backends.split(',').map(str::trim) {
        let (row, out) = measure_backend(backend, &file, &prompts, &opts, args)?;
        eprintln!(
            "[{}: {:.2} tokens/s decoding]",
            row.backend,
            row.totals.tokens_per_second()
        );
        rows.push(row);
        outputs.push(out);
    }
    let same = outputs.windows(2).all(|w| w[0] == w[1]);
    let name = args
        .model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();

    let mut md = String::new();
    speed_table(&mut md, &name, prompts.len(), args, &rows)?;
    agreement_lines(&mut md, same, &rows, &outputs)?;
    block_table(&mut md, args, &rows)?;
    host_table(&mut md, args, &rows)?;
    profile_tables(&mut md, &rows)?;
    print!("{md}");
    if let Some(path) = &args.json {
        let v = report_json(&name, prompts.len(), same, args, &rows);
        std::fs::write(path, serde_json::to_string_pretty(&v)?)?;
    }
    Ok(())
}

/// Plain decoding of every prompt on one backend (`cpu`, `reference` or `gpu`), with its
/// block times, and on the gpu backend its host cost and (`--profile`) its kernels: the row
/// of the report and each prompt's output.
fn measure_backend(
    backend: &str,
    file: &std::sync::Arc<GgufFile>,
    prompts: &[Vec<u32>],
    opts: &GenerateOptions,
    args: &BenchArgs,
) -> Result<(Row, Vec<Vec<u32>>)> {
    let plain = |backend: &str, detail: String, totals, block_ms, prefill_ms| Row {
        backend: backend.into(),
        detail,
        totals,
        dispatches_per_forward: None,
        host: Vec::new(),
        profile: Vec::new(),
        block_ms,
        prefill_ms,
    };
    match backend {
        "cpu" => {
            let mut m = crate::load_cpu(file, Some(2048), args.threads)?;
            let detail = crate::cpu_detail(&m);
            let (totals, out) = measure(&mut m, prompts, opts)?;
            let (block_ms, prefill_ms) = block_times(&mut m, &prompts[0], args)?;
            Ok((plain("cpu", detail, totals, block_ms, prefill_ms), out))
        }
        "reference" => {
            let mut m = CpuModel::load(file, Some(2048))?;
            let (totals, out) = measure(&mut m, prompts, opts)?;
            let (block_ms, prefill_ms) = block_times(&mut m, &prompts[0], args)?;
            let detail = "f32 reference".into();
            Ok((
                plain("reference", detail, totals, block_ms, prefill_ms),
                out,
            ))
        }
        "gpu" => {
            let ctx = crate::open_gpu(args.gpu_kernels)?;
            let mut m = GpuModel::load(&ctx, file, Some(2048))?;
            let (totals, out) = measure(&mut m, prompts, opts)?;
            let d = m.dispatches_per_forward();
            let host = pollster::block_on(m.host_costs(
                &prompts[0],
                &[1, args.verify_block.max(1)],
                args.host_reps.max(1),
                None,
            ))?;
            let profile = match args.profile {
                true => profile(&mut m, &prompts[0])?,
                false => Vec::new(),
            };
            let (block_ms, prefill_ms) = block_times(&mut m, &prompts[0], args)?;
            let row = Row {
                backend: "gpu".into(),
                detail: format!("{}, {} kernels", ctx.adapter_info, ctx.shape.name()),
                totals,
                dispatches_per_forward: Some(d),
                host,
                profile,
                block_ms,
                prefill_ms,
            };
            Ok((row, out))
        }
        other => anyhow::bail!("unknown backend '{other}' (cpu, reference, gpu)"),
    }
}

/// The report's first table: prefill and decoding speed per backend, against the cpu's.
fn speed_table(
    md: &mut String,
    name: &str,
    prompts: usize,
    args: &BenchArgs,
    rows: &[Row],
) -> Result<()> {
    writeln!(
        md,
        "Model `{name}`, {prompts} prompts, {} greedy tokens each, plain decoding.\n",
        args.max_tokens
    )?;
    writeln!(md, "| backend | device | prefill tok/s | decode tok/s | vs cpu | dispatches/forward | submits/token |")?;
    writeln!(md, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")?;
    let cpu_tps = rows
        .iter()
        .find(|r| r.backend == "cpu")
        .map(|r| r.totals.tokens_per_second());
    for r in rows {
        let t = &r.totals;
        let prefill = t.prompt_tokens as f64 / t.prefill_seconds.max(1e-9);
        let ratio = cpu_tps.map_or("-".to_owned(), |c| {
            format!("{:.2}x", t.tokens_per_second() / c)
        });
        let dispatches = r
            .dispatches_per_forward
            .map_or("-".to_owned(), |d| d.to_string());
        let submits = if r.dispatches_per_forward.is_some() {
            "1"
        } else {
            "-"
        };
        writeln!(
            md,
            "| {} | {} | {prefill:.1} | {:.2} | {ratio} | {dispatches} | {submits} |",
            r.backend,
            r.detail,
            t.tokens_per_second()
        )?;
    }
    Ok(())
}

/// Whether the backends' greedy outputs are identical, and where they part when not.
fn agreement_lines(
    md: &mut String,
    same: bool,
    rows: &[Row],
    outputs: &[Vec<Vec<u32>>],
) -> Result<()> {
    writeln!(
        md,
        "\nGreedy outputs identical across backends: {}",
        if same { "yes" } else { "no" }
    )?;
    if !same {
        let names: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
        for line in agreement(&names, outputs) {
            writeln!(md, "- {line}")?;
        }
    }
    Ok(())
}

/// `--block-sizes`: one forward of each block size per backend, all rows' logits and the last
/// row's.
fn block_table(md: &mut String, args: &BenchArgs, rows: &[Row]) -> Result<()> {
    if args.block_sizes.is_empty() {
        return Ok(());
    }
    writeln!(
        md,
        "\nOne forward of a block of m tokens after the first prompt (logits for every row), \
         ms (best of {}), and relative to m = {}:\n",
        args.block_reps.max(1),
        args.block_sizes[0]
    )?;
    let head: Vec<String> = args.block_sizes.iter().map(|m| format!("m={m}")).collect();
    writeln!(md, "| backend | {} |", head.join(" | "))?;
    writeln!(md, "| --- |{}", " ---: |".repeat(head.len()))?;
    for r in rows {
        for (kind, ms) in [("", &r.block_ms), (", last row's logits", &r.prefill_ms)] {
            let cells: Vec<String> = ms
                .iter()
                .map(|t| format!("{t:.1} ({:.2}x)", t / ms[0]))
                .collect();
            writeln!(md, "| {}{kind} | {} |", r.backend, cells.join(" | "))?;
        }
    }
    Ok(())
}

/// The gpu backend's host cost per forward, decoding and a verification block.
fn host_table(md: &mut String, args: &BenchArgs, rows: &[Row]) -> Result<()> {
    if rows.iter().all(|r| r.host.is_empty()) {
        return Ok(());
    }
    writeln!(
        md,
        "\nHost cost of one gpu forward after the first prompt (argmax read back, median of \
         {}): encoding and submitting, then waiting for the device:\n",
        args.host_reps.max(1)
    )?;
    writeln!(
        md,
        "| backend | rows | dispatches | encode+submit ms | wait ms |"
    )?;
    writeln!(md, "| --- | ---: | ---: | ---: | ---: |")?;
    for r in rows {
        for h in &r.host {
            writeln!(
                md,
                "| {} | {} | {} | {:.3} | {:.1} |",
                r.backend, h.rows, h.dispatches, h.encode_submit_ms, h.wait_ms
            )?;
        }
    }
    Ok(())
}

/// `--profile`: a decoding forward of each profiled backend by kernel.
fn profile_tables(md: &mut String, rows: &[Row]) -> Result<()> {
    for r in rows.iter().filter(|r| !r.profile.is_empty()) {
        // With timestamps the device's own times rank the kernels; the host clock adds the
        // submit and the poll to each.
        let timed = r.profile.iter().all(|k| k.device_ms.is_some());
        let share_of = |k: &KernelTime| match timed {
            true => k.device_ms.unwrap_or(0.0),
            false => k.ms,
        };
        let total: f64 = r.profile.iter().map(share_of).sum();
        let clock = match timed {
            true => "device timestamps",
            false => "host clock, device idle before and after; no timestamp queries here",
        };
        writeln!(
            md,
            "\nOne decoding forward of the {} backend by kernel, each dispatch timed alone \
             ({clock}; {total:.2} ms in all):\n",
            r.backend
        )?;
        writeln!(
            md,
            "| kernel | dispatches | ms each | ms total | host ms total | share |"
        )?;
        writeln!(md, "| --- | ---: | ---: | ---: | ---: | ---: |")?;
        for k in &r.profile {
            writeln!(
                md,
                "| {} | {} | {:.3} | {:.2} | {:.2} | {:.1}% |",
                k.label,
                k.count,
                share_of(k) / k.count as f64,
                share_of(k),
                k.ms,
                100.0 * share_of(k) / total.max(1e-12)
            )?;
        }
    }
    Ok(())
}

/// The report as JSON (`--json`).
fn report_json(
    name: &str,
    prompts: usize,
    same: bool,
    args: &BenchArgs,
    rows: &[Row],
) -> serde_json::Value {
    json!({
        "model": name,
        "max_tokens": args.max_tokens,
        "prompts": prompts,
        "identical_outputs": same,
        "rows": rows.iter().map(|r| json!({
            "backend": r.backend, "device": r.detail,
            "prompt_tokens": r.totals.prompt_tokens, "generated_tokens": r.totals.generated_tokens,
            "prefill_seconds": r.totals.prefill_seconds, "decode_seconds": r.totals.decode_seconds,
            "tokens_per_second": r.totals.tokens_per_second(),
            "dispatches_per_forward": r.dispatches_per_forward,
            "block_sizes": args.block_sizes, "block_ms": r.block_ms, "prefill_ms": r.prefill_ms,
            "profile": r.profile.iter().map(|k| json!({
                "kernel": k.label, "dispatches": k.count, "ms": k.ms,
                "device_ms": k.device_ms,
            })).collect::<Vec<_>>(),
            "host_cost": r.host.iter().map(|h| json!({
                "rows": h.rows, "dispatches": h.dispatches,
                "encode_submit_ms": h.encode_submit_ms, "wait_ms": h.wait_ms,
                "staging_writes": h.staging_writes, "reps": h.reps,
                "encode_submit_samples_ms": h.encode_submit_samples_ms,
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

/// Milliseconds per forward of a causal block of each of `--block-sizes` after `prompt` is in
/// the cache (best of `--block-reps`; the cache is truncated back after each forward): with
/// logits for every row (verification), then for the last row only (prefill).
fn block_times<M: LanguageModel>(
    m: &mut M,
    prompt: &[u32],
    args: &BenchArgs,
) -> Result<(Vec<f64>, Vec<f64>)> {
    if args.block_sizes.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    m.truncate(0);
    pollster::block_on(m.forward_argmax(&Batch::causal(prompt, 0).logits_for_last(0)))?;
    let base = m.cache_len();
    let mut time = |size: usize, outputs: usize| -> Result<f64> {
        // Tokens of the prompt, repeated: any valid ids do.
        let block: Vec<u32> = prompt.iter().copied().cycle().take(size.max(1)).collect();
        let batch = Batch::causal(&block, base).logits_for_last(outputs);
        let mut best = f64::INFINITY;
        for _ in 0..args.block_reps.max(1) {
            let t = Instant::now();
            pollster::block_on(m.forward(&batch))?;
            best = best.min(t.elapsed().as_secs_f64() * 1e3);
            m.truncate(base);
        }
        Ok(best)
    };
    let all = args
        .block_sizes
        .iter()
        .map(|&n| time(n, n))
        .collect::<Result<_>>()?;
    let last = args
        .block_sizes
        .iter()
        .map(|&n| time(n, 1))
        .collect::<Result<_>>()?;
    Ok((all, last))
}

/// Each dispatch of a decoding forward (one token behind `prompt`) timed alone, summed per
/// label, most time first.
fn profile(m: &mut GpuModel, prompt: &[u32]) -> Result<Vec<KernelTime>> {
    m.truncate(0);
    pollster::block_on(m.forward_argmax(&Batch::causal(prompt, 0).logits_for_last(0)))?;
    let base = m.cache_len();
    let times = m.profile(&Batch::causal(&prompt[..1], base), 3)?;
    let mut out: Vec<KernelTime> = Vec::new();
    for t in times {
        match out.iter_mut().find(|k| k.label == t.label) {
            Some(k) => {
                k.count += 1;
                k.ms += t.seconds * 1e3;
                k.device_ms = k.device_ms.zip(t.device_seconds).map(|(a, b)| a + b * 1e3);
            }
            None => out.push(KernelTime {
                label: t.label,
                count: 1,
                ms: t.seconds * 1e3,
                device_ms: t.device_seconds.map(|s| s * 1e3),
            }),
        }
    }
    out.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    Ok(out)
}

/// Runs every prompt (the first once more beforehand as a warm-up) and sums the stats.
fn measure<M: LanguageModel>(
    m: &mut M,
    prompts: &[Vec<u32>],
    opts: &GenerateOptions,
) -> Result<(Stats, Vec<Vec<u32>>)> {
    let warm = GenerateOptions {
        max_tokens: 2,
        ..opts.clone()
    };
    pollster::block_on(generate(
        m,
        &prompts[0],
        &warm,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))?;
    let mut total = Stats::default();
    let mut outputs = Vec::new();
    for p in prompts {
        // End-of-text does not stop a benchmark run: every prompt decodes the same count.
        let g = pollster::block_on(generate(
            m,
            p,
            opts,
            |_| false,
            |_, _| ControlFlow::Continue(()),
        ))?;
        total.add(&g.stats);
        outputs.push(g.tokens);
    }
    Ok((total, outputs))
}

/// Which backends' greedy outputs agree, pair by pair, and where the first difference is.
/// The cpu engine rounds activations to 8 bits inside its products (as llama.cpp does) where
/// the reference and the gpu engine keep f32, so its greedy text may part from theirs where
/// two candidates are nearly tied: that is said, not hidden behind a bare "no".
fn agreement(backends: &[&str], outputs: &[Vec<Vec<u32>>]) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..outputs.len() {
        for j in i + 1..outputs.len() {
            let (a, b) = (&outputs[i], &outputs[j]);
            // Per differing prompt, the 1-based position of its first differing token.
            let first: Vec<String> = a
                .iter()
                .zip(b)
                .filter(|(x, y)| x != y)
                .map(|(x, y)| x.iter().zip(y).take_while(|(p, q)| p == q).count() + 1)
                .map(|t| t.to_string())
                .collect();
            let pair = format!("{} and {}", backends[i], backends[j]);
            lines.push(match first.is_empty() {
                true => format!("{pair}: identical on every prompt"),
                false => format!(
                    "{pair}: differ on {} of {} prompts (first differing token: {}){}",
                    first.len(),
                    a.len().min(b.len()),
                    first.join(", "),
                    if backends[i] == "cpu" || backends[j] == "cpu" {
                        ": the cpu engine rounds activations to 8 bits inside its products, \
                         as llama.cpp does; the reference and the gpu engine keep f32"
                    } else {
                        ""
                    }
                ),
            });
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::agreement;

    #[test]
    fn agreement_names_the_pairs_and_the_first_difference() {
        let same = vec![vec![1, 2, 3], vec![4, 5]];
        let parted = vec![vec![1, 2, 9], vec![4, 5]];
        let lines = agreement(&["reference", "gpu", "cpu"], &[same.clone(), same, parted]);
        assert_eq!(lines[0], "reference and gpu: identical on every prompt");
        assert!(
            lines[1].starts_with("reference and cpu: differ on 1 of 2 prompts (first differing token: 3): the cpu engine"),
            "{}",
            lines[1]
        );
        assert!(lines[2].starts_with("gpu and cpu: differ on 1 of 2 prompts"));
    }
}
