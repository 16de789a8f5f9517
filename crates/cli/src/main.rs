//! `runahead`: the native command-line front end of the engine (see docs/design.md for the
//! contract: info, tokenize, generate).

mod bench;
mod commands;
mod drafting;
mod spec_bench;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use runahead_gpu::kernels::KernelShape;
use runahead_gpu::{GpuContext, GpuOptions};

#[derive(Parser)]
#[command(
    name = "runahead",
    version,
    about = "Run GGUF language models with speculative decoding"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Architecture, tensor types, tokenizer and chat template of a model.
    Info {
        #[arg(long)]
        model: PathBuf,
    },
    /// Prints the token ids of TEXT as a JSON array.
    Tokenize {
        #[arg(long)]
        model: PathBuf,
        #[arg(long)]
        text: String,
    },
    /// Generates a continuation of a prompt.
    Generate(GenerateArgs),
    /// Measures prefill and decoding speed per backend on a set of prompts, in one run.
    Bench(bench::BenchArgs),
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct GenerateArgs {
    #[arg(long)]
    model: PathBuf,
    /// Raw prompt text, tokenized as is (control tokens such as <|im_start|> are recognized).
    #[arg(long)]
    prompt: String,
    /// Apply the model's chat template to the prompt as one user message.
    #[arg(long)]
    chat: bool,
    #[arg(long, default_value_t = 128)]
    max_tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 0)]
    top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    top_p: f32,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    backend: Backend,
    /// Threads of the cpu backend (default: the machine's cores).
    #[arg(long)]
    threads: Option<usize>,
    /// none | ngram | suffix | model:PATH | auto | auto:PATH (suffix lookup or a draft model)
    #[arg(long, default_value = "none")]
    draft: String,
    /// Draft tokens verified per step: auto (calibrated on the device, adapted to acceptance)
    /// or a fixed number.
    #[arg(long, default_value = "auto")]
    depth: String,
    /// KV cache size in tokens (default: the model's context length).
    #[arg(long)]
    context: Option<usize>,
    /// Which GPU kernels --backend gpu runs.
    #[arg(long, value_enum, default_value_t = GpuKernels::Auto)]
    gpu_kernels: GpuKernels,
    /// Print one JSON object with tokens, text and stats when done.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The CPU engine: weights in their block formats, SIMD kernels, threads.
    Cpu,
    /// The f32 reference engine (slow; the oracle the others are tested against).
    Reference,
    Gpu,
}

impl Backend {
    fn name(self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Reference => "reference",
            Backend::Gpu => "gpu",
        }
    }
}

/// Loads the cpu backend's engine for `file` with `threads` (default: every core).
fn load_cpu(
    file: &std::sync::Arc<runahead_gguf::GgufFile>,
    context: Option<usize>,
    threads: Option<usize>,
) -> anyhow::Result<runahead_cpu::CpuEngine> {
    if threads == Some(0) {
        anyhow::bail!("--threads must be at least 1");
    }
    let options = runahead_cpu::CpuOptions {
        context,
        threads,
        isa: None,
    };
    let engine = runahead_cpu::CpuEngine::load(file.clone(), &options)
        .context("cannot load the model's weights")?;
    Ok(engine)
}

/// How the cpu backend runs, for reports: `"avx2 kernels, 2 threads"`.
fn cpu_detail(engine: &runahead_cpu::CpuEngine) -> String {
    format!(
        "{} kernels, {} thread{}",
        engine.isa().name(),
        engine.threads(),
        if engine.threads() == 1 { "" } else { "s" }
    )
}

/// Which GPU kernels to run (`--gpu-kernels`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GpuKernels {
    /// The adapter's: `emulated` on a GPU emulated on the CPU (lavapipe), `gpu` on the rest.
    Auto,
    /// Whole rows per invocation and no barriers, for GPUs emulated on a CPU.
    Emulated,
    /// Rows and attention split over workgroups, for real GPUs.
    Gpu,
}

/// Opens the GPU with the kernels asked for, and says which adapter and kernels on stderr.
fn open_gpu(kernels: GpuKernels) -> anyhow::Result<GpuContext> {
    let shape = match kernels {
        GpuKernels::Auto => None,
        GpuKernels::Emulated => Some(KernelShape::EMULATED),
        GpuKernels::Gpu => Some(KernelShape::GPU),
    };
    let ctx = pollster::block_on(GpuContext::new(GpuOptions {
        shape,
        ..GpuOptions::default()
    }))
    .context("cannot open a GPU")?;
    eprintln!("[gpu: {}, {} kernels]", ctx.adapter_info, ctx.shape.name());
    Ok(ctx)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info { model } => commands::info(&model),
        Command::Tokenize { model, text } => commands::tokenize(&model, &text),
        Command::Generate(args) => commands::generate(&args),
        Command::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("runahead: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
