//! `runahead`: the native command-line front end of the engine (see docs/design.md for the
//! contract: info, tokenize, generate).

#![forbid(unsafe_code)]

mod bench;
mod chat;
mod commands;
mod drafting;
mod engine;
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
    /// Chats with a model: reads a message per line from stdin, streams the answers, and keeps
    /// the conversation (and the engine's cache of it) between turns. EOF ends it.
    Chat(chat::ChatArgs),
    /// Measures prefill and decoding speed per backend on a set of prompts, in one run.
    Bench(bench::BenchArgs),
}

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
struct GenerateArgs {
    #[command(flatten)]
    engine: engine::EngineArgs,
    /// Raw prompt text, tokenized as is (control tokens such as <|im_start|> are recognized).
    #[arg(long)]
    prompt: String,
    /// Apply the model's chat template to the prompt as one user message.
    #[arg(long)]
    chat: bool,
    /// With --chat: a system message before the prompt.
    #[arg(long, value_name = "TEXT", requires = "chat")]
    system: Option<String>,
    #[command(flatten)]
    sample: engine::SampleArgs,
    /// Constrain the output to match a JSON Schema (FILE holds the schema as JSON).
    #[arg(long, value_name = "FILE", conflicts_with = "grammar")]
    json_schema: Option<std::path::PathBuf>,
    /// Constrain the output to a grammar in llguidance's Lark syntax (FILE holds it: rules such
    /// as `start: "yes" | "no"`, regex terminals `/[0-9]+/`, `%json { schema }`). A regex alone
    /// is `start: /REGEX/`.
    #[arg(long, value_name = "FILE")]
    grammar: Option<std::path::PathBuf>,
    /// With --chat: tools the model may call. FILE holds a JSON array of OpenAI tool
    /// definitions (`{"type": "function", "function": {"name", "description", "parameters"}}`);
    /// the calls in the reply are printed as --json's `tool_calls`.
    #[arg(long, value_name = "FILE", requires = "chat", conflicts_with_all = ["json_schema", "grammar"])]
    tools: Option<std::path::PathBuf>,
    /// With --tools: `auto` (the model answers or calls), `required` (at least one call) or a
    /// tool's name (a call of that tool); a grammar makes required and named calls well-formed.
    #[arg(
        long,
        value_name = "CHOICE",
        default_value = "auto",
        requires = "tools"
    )]
    tool_choice: String,
    /// With --tools: a reply may make several calls (one without it).
    #[arg(long, requires = "tools")]
    parallel_tool_calls: bool,
    /// Print one JSON object with tokens, text and stats when done.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
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
pub enum GpuKernels {
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
        Command::Chat(args) => chat::run(&args),
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
