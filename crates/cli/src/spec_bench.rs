//! `runahead bench --suites ...`: speculative decoding against plain decoding on the prompt
//! suites of `runahead-bench`, per backend and drafter, measured in the same run. Every
//! speculative output is checked against the plain output of the same prompt.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use runahead_bench::{
    all_suites, kind_summary, load_suite, markdown_table, plot_speedups, summary_table, BenchRow,
    Suite, SuiteKind,
};
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::{
    model_template, ChatMessage, ChatTemplate, CpuModel, LanguageModel, Tokenizer,
};
use runahead_speculate::{
    calibrate, generate_with, CostModel, Depth, Drafter, GenerateOptions, Generation,
    SamplingParams, Stats, MAX_DRAFT,
};

use crate::drafting::{build_drafter, DraftBackend, DraftSpec};

#[derive(clap::Args)]
pub struct SuiteArgs {
    /// Suites to run: `all`, `grounded`, `code`, `open`, or comma-separated suite names.
    #[arg(long)]
    pub suites: Option<String>,
    /// Prompts per suite.
    #[arg(long, default_value_t = 2)]
    pub n: usize,
    /// Comma-separated drafters (none excluded: plain decoding is always measured).
    #[arg(long, default_value = "ngram,suffix,auto")]
    pub drafters: String,
    /// Where the prompt sets are (scripts/fetch-prompts.sh).
    #[arg(long, default_value = runahead_bench::DEFAULT_PROMPTS_DIR)]
    pub prompts_dir: PathBuf,
    /// Directory for report.md, rows.json and speedup.svg.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Draft tokens verified per step: auto (calibrated on the device, adapted to acceptance)
    /// or a fixed number (15 verifies every draft in full: tokens per target forward is then
    /// the speedup where verifying 16 tokens costs what one does).
    #[arg(long, default_value = "auto")]
    pub depth: String,
    /// Write the selected suites' prompts (JSON: suites with their prompts' ids, texts and
    /// whether each goes through the chat template) to this file and run nothing: the
    /// browser bench runs the same prompts (scripts/browser-spec-bench.sh).
    #[arg(long)]
    pub dump_prompts: Option<PathBuf>,
    /// Also write each prompt's token ids and its plain (greedy) output, with the cost model
    /// the run ended with, to this file (JSON): drafters can then be replayed against the
    /// target's real outputs without the model (`cargo run --release -p runahead-speculate
    /// --example replay -- FILE`).
    #[arg(long)]
    pub traces: Option<PathBuf>,
}

fn select_suites(args: &SuiteArgs, which: &str) -> Result<Vec<Suite>> {
    let dir = &args.prompts_dir;
    let kind = |k: SuiteKind| -> Result<Vec<Suite>> {
        Ok(all_suites(dir, args.n)?
            .into_iter()
            .filter(|s| s.kind == k)
            .collect())
    };
    Ok(match which {
        "all" => all_suites(dir, args.n)?,
        "grounded" => kind(SuiteKind::Grounded)?,
        "code" => kind(SuiteKind::Code)?,
        "open" => kind(SuiteKind::Open)?,
        names => names
            .split(',')
            .map(|n| load_suite(dir, n.trim(), args.n))
            .collect::<Result<_, _>>()?,
    })
}

/// Prompt token ids (chat prompts through the model's template).
fn encode(
    tok: &Tokenizer,
    template: Option<&ChatTemplate>,
    text: &str,
    chat: bool,
) -> Result<Vec<u32>> {
    Ok(match (chat, template) {
        (true, Some(t)) => {
            tok.encode_rendered(&t.render(&[ChatMessage::new("user", text)], true)?)?
        }
        _ => tok.encode(text)?,
    })
}

pub fn run(
    model: &Path,
    backends: &str,
    threads: Option<usize>,
    max_tokens: usize,
    context: usize,
    gpu_kernels: crate::GpuKernels,
    args: &SuiteArgs,
) -> Result<()> {
    let suites = select_suites(args, args.suites.as_deref().unwrap_or("all"))?;
    if let Some(path) = &args.dump_prompts {
        std::fs::write(path, serde_json::to_string_pretty(&suites)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let prompts: usize = suites.iter().map(|s| s.prompts.len()).sum();
        eprintln!(
            "wrote {prompts} prompts of {} suites to {}",
            suites.len(),
            path.display()
        );
        return Ok(());
    }
    let file = GgufFile::open(model).with_context(|| format!("cannot load {}", model.display()))?;
    let file = std::sync::Arc::new(file);
    let tok = Tokenizer::from_metadata(&file.header.metadata)?;
    let template = match model_template(&file.header.metadata) {
        Some(t) => Some(ChatTemplate::for_tokenizer(t.source, &tok)?),
        None => None,
    };
    let mut encoded = Vec::new();
    for s in &suites {
        let mut prompts = Vec::new();
        for p in &s.prompts {
            let ids = encode(&tok, template.as_ref(), &p.text, p.chat)?;
            if ids.len() + max_tokens + 16 < context {
                prompts.push(ids);
            }
        }
        encoded.push(prompts);
    }
    let fixed_depth = match args.depth.as_str() {
        "auto" => None,
        n => match n.parse::<usize>() {
            Ok(n) if n >= 1 => Some(n),
            _ => bail!("--depth {n}: expected auto or a number of draft tokens >= 1"),
        },
    };
    let specs: Vec<(String, DraftSpec)> = args
        .drafters
        .split(',')
        .map(|d| Ok((d.trim().to_owned(), DraftSpec::parse(d.trim())?)))
        .collect::<Result<_>>()?;
    let mut rows = Vec::new();
    let mut devices = Vec::new();
    let mut traces = Traces::default();
    let run = SuiteRun {
        suites: &suites,
        encoded: &encoded,
        max_tokens,
        fixed_depth,
    };
    for backend in backends.split(',').map(str::trim) {
        match backend {
            "cpu" => {
                let mut m = crate::load_cpu(&file, Some(context), threads)?;
                devices.push(format!("cpu: {}", crate::cpu_detail(&m)));
                let drafters = specs
                    .iter()
                    .map(|(n, s)| {
                        let backend = DraftBackend::Cpu { threads };
                        Ok((n.clone(), build_drafter(s, &tok, backend, context)?))
                    })
                    .collect::<Result<Vec<_>>>()?;
                rows.extend(bench_backend(&mut m, "cpu", drafters, &run, &mut traces)?);
            }
            "reference" => {
                let mut m = CpuModel::load(&file, Some(context))?;
                devices.push("reference: f32 reference engine".to_owned());
                let drafters = specs
                    .iter()
                    .map(|(n, s)| {
                        Ok((
                            n.clone(),
                            build_drafter(s, &tok, DraftBackend::Reference, context)?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                rows.extend(bench_backend(
                    &mut m,
                    "reference",
                    drafters,
                    &run,
                    &mut traces,
                )?);
            }
            "gpu" => {
                let ctx = crate::open_gpu(gpu_kernels)?;
                devices.push(format!(
                    "gpu: {}, {} kernels",
                    ctx.adapter_info,
                    ctx.shape.name()
                ));
                let mut m = GpuModel::load(&ctx, &file, Some(context))?;
                let drafters = specs
                    .iter()
                    .map(|(n, s)| {
                        Ok((
                            n.clone(),
                            build_drafter(s, &tok, DraftBackend::Gpu(&ctx), context)?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                rows.extend(bench_backend(&mut m, "gpu", drafters, &run, &mut traces)?);
            }
            other => bail!("unknown backend '{other}' (cpu, reference, gpu)"),
        }
    }
    write_report(model, &devices, max_tokens, args, &rows)?;
    if let Some(path) = &args.traces {
        std::fs::write(path, serde_json::to_string(&traces)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!(
            "[wrote {} prompts' outputs to {}]",
            traces.prompts.len(),
            path.display()
        );
    }
    Ok(())
}

/// What `--traces` writes: every prompt's plain output on the first backend, and the cost of
/// every block size a step verifies (1..=`MAX_DRAFT + 1` rows) behind [`TRACE_CONTEXTS`] as the
/// run ended.
#[derive(Default, serde::Serialize)]
struct Traces {
    backend: String,
    /// Seconds of a forward of 1..=`MAX_DRAFT + 1` rows, one list per context.
    cost: Vec<(usize, Vec<f64>)>,
    prompts: Vec<Trace>,
}

#[derive(serde::Serialize)]
struct Trace {
    suite: String,
    kind: SuiteKind,
    prompt: Vec<u32>,
    output: Vec<u32>,
}

/// Contexts the traces' cost is written at (the calibration's own two).
const TRACE_CONTEXTS: [usize; 2] = [64, 1024];

type NamedDrafter = (String, Option<Box<dyn Drafter>>);

/// What every backend runs: the suites, their prompts' ids, and how.
struct SuiteRun<'a> {
    suites: &'a [Suite],
    encoded: &'a [Vec<Vec<u32>>],
    max_tokens: usize,
    fixed_depth: Option<usize>,
}

fn bench_backend<M: LanguageModel>(
    m: &mut M,
    backend: &str,
    mut drafters: Vec<NamedDrafter>,
    run: &SuiteRun,
    traces: &mut Traces,
) -> Result<Vec<BenchRow>> {
    let &SuiteRun {
        suites,
        encoded,
        max_tokens,
        fixed_depth,
    } = run;
    // Only the first backend's outputs are kept (the others' may differ: 8-bit activations).
    let tracing = traces.backend.is_empty();
    if tracing {
        traces.backend = backend.to_owned();
    }
    let depth = match fixed_depth {
        Some(n) => Depth::Fixed(n),
        None => {
            let cost = pollster::block_on(calibrate(m, 3))?;
            print_cost(backend, "calibrated", &cost);
            Depth::adaptive(cost)
        }
    };
    let greedy = |depth| GenerateOptions {
        max_tokens,
        sampling: SamplingParams::greedy(),
        depth,
        ..GenerateOptions::default()
    };
    let plain_opts = greedy(Depth::default());
    let mut spec_opts = greedy(depth);
    let mut rows = Vec::new();
    for (suite, prompts) in suites.iter().zip(encoded) {
        if prompts.is_empty() {
            continue;
        }
        // Per prompt: plain, every drafter, plain again. Measured side by side, a slow or a fast
        // patch of a noisy machine weighs on both sides of a ratio.
        let mut plain = Stats::default();
        let mut spec = vec![Stats::default(); drafters.len()];
        for p in prompts {
            let want = plain_run(m, p, &plain_opts)?;
            plain.add(&want.stats);
            for ((name, drafter), spec) in drafters.iter_mut().zip(&mut spec) {
                let Some(d) = drafter.as_deref_mut() else {
                    continue;
                };
                let g = pollster::block_on(generate_with(
                    m,
                    Some(&mut *d),
                    p,
                    &spec_opts,
                    |_| false,
                    |_, _| ControlFlow::Continue(()),
                ))?;
                if g.tokens != want.tokens {
                    bail!(
                        "{backend}/{name}/{}: speculative output differs from plain output",
                        suite.name
                    );
                }
                spec.add(&g.stats);
                // Adaptive depth learns across generations, as in a long-running page.
                spec_opts.depth = g.depth;
            }
            let again = plain_run(m, p, &plain_opts)?;
            if again.tokens != want.tokens {
                bail!(
                    "{backend}/{}: plain decoding is not deterministic",
                    suite.name
                );
            }
            plain.add(&again.stats);
            if tracing {
                traces.prompts.push(Trace {
                    suite: suite.name.clone(),
                    kind: suite.kind,
                    prompt: p.clone(),
                    output: want.tokens,
                });
            }
        }
        for ((name, drafter), spec) in drafters.iter().zip(&spec) {
            if drafter.is_none() {
                continue;
            }
            let row = BenchRow {
                suite: suite.name.clone(),
                kind: suite.kind,
                backend: backend.to_owned(),
                drafter: name.clone(),
                prompts: prompts.len(),
                generated_tokens: spec.generated_tokens as u64,
                plain_tps: plain.tokens_per_second(),
                spec_tps: spec.tokens_per_second(),
                speedup: spec.tokens_per_second() / plain.tokens_per_second().max(1e-12),
                acceptance_rate: spec.acceptance_rate(),
                mean_accepted_len: spec.mean_accepted_length(),
                target_forwards_per_token: spec.target_forwards as f64
                    / spec.generated_tokens.max(1) as f64,
            };
            eprintln!(
                "[{backend} {} {name}: plain {:.2} tok/s, speculative {:.2} tok/s ({:.2}x), acceptance {:.2}]",
                suite.name, row.plain_tps, row.spec_tps, row.speedup, row.acceptance_rate
            );
            rows.push(row);
        }
    }
    if let Depth::Adaptive(a) = &spec_opts.depth {
        print_cost(backend, "after the run", &a.cost);
        if tracing {
            traces.cost = TRACE_CONTEXTS
                .iter()
                .map(|&c| {
                    let curve = a.cost.at(c);
                    (c, (1..=MAX_DRAFT + 1).map(|r| curve.seconds(r)).collect())
                })
                .collect();
        }
    }
    Ok(rows)
}

fn plain_run<M: LanguageModel>(
    m: &mut M,
    prompt: &[u32],
    opts: &GenerateOptions,
) -> Result<Generation> {
    Ok(pollster::block_on(generate_with(
        m,
        None::<&mut dyn Drafter>,
        prompt,
        opts,
        |_| false,
        |_, _| ControlFlow::Continue(()),
    ))?)
}

fn print_cost(backend: &str, when: &str, cost: &CostModel) {
    for context in [64, 1024] {
        let curve = cost.at(context);
        let ratios: Vec<String> = curve.ratios().iter().map(|r| format!("{r:.2}")).collect();
        eprintln!(
            "[{backend}: verification cost ({when}) behind {context} entries: 1 row {:.1} ms; 1..16 rows relative to 1: {}]",
            curve.seconds(1) * 1e3,
            ratios.join(" ")
        );
    }
}

fn write_report(
    model: &Path,
    devices: &[String],
    max_tokens: usize,
    args: &SuiteArgs,
    rows: &[BenchRow],
) -> Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let name = model
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut md = format!(
        "Model `{name}`, greedy, {max_tokens} tokens per prompt, up to {} prompts per suite, depth {}; {}. Speculative output verified identical to plain output for every prompt.\n\n",
        args.n,
        args.depth,
        devices.join("; ")
    );
    md.push_str(&summary_table(&kind_summary(rows)));
    md.push('\n');
    md.push_str(&markdown_table(rows));
    std::fs::write(args.out.join("report.md"), &md)?;
    std::fs::write(
        args.out.join("rows.json"),
        serde_json::to_string_pretty(rows)?,
    )?;
    plot_speedups(rows, &args.out.join("speedup.svg"))?;
    print!("{md}");
    eprintln!(
        "[wrote {}/report.md, rows.json, speedup.svg]",
        args.out.display()
    );
    Ok(())
}
