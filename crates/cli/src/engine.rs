//! What `generate` and `chat` share: the options that pick and load an engine (backend,
//! drafter, depth, context) and those of one generation (sampling, stop strings), the chat
//! template, and loading the engine for a task that is generic over it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::{model_template, ChatTemplate, CpuModel, LanguageModel, Tokenizer};
use runahead_speculate::{Drafter, GenerateOptions, SamplingParams, StopStrings};

use crate::drafting::{build_drafter, depth, DraftBackend, DraftSpec};
use crate::{Backend, GpuKernels};

/// Which engine runs the model, and how it speculates.
#[derive(clap::Args)]
pub struct EngineArgs {
    #[arg(long)]
    pub model: PathBuf,
    #[arg(long, value_enum, default_value_t = Backend::Cpu)]
    pub backend: Backend,
    /// Threads of the cpu backend (default: the machine's cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// none | ngram | suffix | model:PATH | auto | auto:PATH (suffix lookup or a draft model)
    #[arg(long, default_value = "none")]
    pub draft: String,
    /// Draft tokens verified per step: auto (calibrated on the device, adapted to acceptance)
    /// or a fixed number.
    #[arg(long, default_value = "auto")]
    pub depth: String,
    /// KV cache size in tokens (default: the model's context length).
    #[arg(long)]
    pub context: Option<usize>,
    /// Which GPU kernels --backend gpu runs.
    #[arg(long, value_enum, default_value_t = GpuKernels::Auto)]
    pub gpu_kernels: GpuKernels,
}

/// How each generation samples and when it ends.
#[derive(clap::Args)]
pub struct SampleArgs {
    #[arg(long, default_value_t = 128)]
    pub max_tokens: usize,
    /// 0 is greedy.
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// 0 keeps every token.
    #[arg(long, default_value_t = 0)]
    pub top_k: usize,
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// End the generation when the text contains TEXT (the output stops before it); repeat for
    /// several (at most 16, each at most 256 bytes).
    #[arg(long, value_name = "TEXT")]
    pub stop: Vec<String>,
}

impl SampleArgs {
    /// The generation options and stop strings, checked.
    pub fn options(&self) -> Result<(GenerateOptions, StopStrings)> {
        let sampling = SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
        };
        sampling.validate()?;
        let stop = StopStrings::new(self.stop.clone()).map_err(|e| anyhow::anyhow!("--{e}"))?;
        let opts = GenerateOptions {
            max_tokens: self.max_tokens,
            sampling,
            ..GenerateOptions::default()
        };
        Ok((opts, stop))
    }
}

pub fn open(path: &std::path::Path) -> Result<GgufFile> {
    GgufFile::open(path).with_context(|| format!("cannot load model {}", path.display()))
}

pub fn tokenizer(file: &GgufFile) -> Result<Tokenizer> {
    Tokenizer::from_metadata(&file.header.metadata).context("cannot build the tokenizer")
}

/// The model's chat template; `what` names the option that needs it, for the error.
pub fn chat_template(file: &GgufFile, tok: &Tokenizer, what: &str) -> Result<ChatTemplate> {
    let template = model_template(&file.header.metadata).with_context(|| {
        format!("{what}: the model has no chat template (tokenizer.chat_template)")
    })?;
    Ok(ChatTemplate::for_tokenizer(template.source, tok)?)
}

/// Work that runs on whichever engine `--backend` loads.
pub trait EngineTask {
    /// `drafter` is what `--draft` built, `opts` carries the depth `--depth` chose.
    fn run<M: LanguageModel>(
        self,
        model: &mut M,
        drafter: Option<Box<dyn Drafter>>,
        depth: runahead_speculate::Depth,
    ) -> Result<()>;
}

/// Loads `file` on the engine `args` names, builds the drafter and the depth policy, and runs
/// `task` on them.
pub fn with_engine(
    args: &EngineArgs,
    file: GgufFile,
    tok: &Tokenizer,
    task: impl EngineTask,
) -> Result<()> {
    let spec = DraftSpec::parse(&args.draft)?;
    if let Some(0) = args.context {
        anyhow::bail!("--context must be at least 1");
    }
    match args.backend {
        Backend::Cpu => {
            let file = Arc::new(file);
            let mut model = crate::load_cpu(&file, args.context, args.threads)?;
            eprintln!("[cpu: {}]", crate::cpu_detail(&model));
            let backend = DraftBackend::Cpu {
                threads: args.threads,
            };
            let drafter = build_drafter(&spec, tok, backend, model.capacity())?;
            let depth = depth(&args.depth, &mut model, drafter.is_some())?;
            task.run(&mut model, drafter, depth)
        }
        Backend::Reference => {
            let mut model =
                CpuModel::load(&file, args.context).context("cannot load the model's weights")?;
            let drafter = build_drafter(&spec, tok, DraftBackend::Reference, model.capacity())?;
            let depth = depth(&args.depth, &mut model, drafter.is_some())?;
            task.run(&mut model, drafter, depth)
        }
        Backend::Gpu => {
            let ctx = crate::open_gpu(args.gpu_kernels)?;
            let mut model = GpuModel::load(&ctx, &file, args.context)
                .context("cannot load the model onto the GPU")?;
            let drafter = build_drafter(&spec, tok, DraftBackend::Gpu(&ctx), model.capacity())?;
            let depth = depth(&args.depth, &mut model, drafter.is_some())?;
            task.run(&mut model, drafter, depth)
        }
    }
}
