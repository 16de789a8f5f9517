use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use runahead_gguf::GgufFile;
use runahead_gpu::GpuModel;
use runahead_model::{ChatMessage, ChatTemplate, CpuModel, LanguageModel, ModelConfig, Tokenizer};
use runahead_speculate::{generate_with, generation_json, GenerateOptions, SamplingParams};

use crate::drafting::{build_drafter, depth, DraftBackend, DraftSpec};
use crate::{Backend, GenerateArgs};

fn open(path: &Path) -> Result<GgufFile> {
    GgufFile::open(path).with_context(|| format!("cannot load model {}", path.display()))
}

fn tokenizer(file: &GgufFile) -> Result<Tokenizer> {
    Tokenizer::from_metadata(&file.header.metadata).context("cannot build the tokenizer")
}

pub fn info(path: &Path) -> Result<()> {
    let file = open(path)?;
    let meta = &file.header.metadata;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "file          {} ({} bytes, GGUF v{})",
        path.display(),
        file.len(),
        file.header.version
    )?;
    if let Ok(name) = meta.str("general.name") {
        writeln!(out, "name          {name}")?;
    }
    match ModelConfig::from_file(&file) {
        Ok(c) => {
            writeln!(out, "architecture  {:?}", c.arch)?;
            writeln!(out, "layers        {}", c.n_layers)?;
            writeln!(out, "embedding     {}  (ffn {})", c.n_embd, c.n_ff)?;
            writeln!(
                out,
                "heads         {} (kv {}, head dim {})",
                c.n_heads, c.n_kv_heads, c.head_dim
            )?;
            writeln!(
                out,
                "rope          {:?}, base {}, dims {}",
                c.rope_mode, c.rope_base, c.rope_dim
            )?;
            writeln!(out, "rms eps       {:e}", c.rms_eps)?;
            writeln!(out, "context       {}", c.context_length)?;
            writeln!(out, "vocab         {}", c.vocab_size)?;
        }
        Err(e) => writeln!(out, "architecture  unsupported: {e}")?,
    }
    let params: u64 = file.header.tensors.iter().map(|t| t.n_elements()).sum();
    writeln!(
        out,
        "parameters    {params} in {} tensors",
        file.header.tensors.len()
    )?;
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    for t in &file.header.tensors {
        *types.entry(t.ty.to_string()).or_default() += 1;
    }
    let types: Vec<String> = types.iter().map(|(t, n)| format!("{n} x {t}")).collect();
    writeln!(out, "tensor types  {}", types.join(", "))?;
    writeln!(
        out,
        "tied output   {}",
        file.header.tensor("output.weight").is_none()
    )?;
    match tokenizer(&file) {
        Ok(t) => {
            let show = |id: Option<u32>| {
                id.map_or("none".to_owned(), |i| format!("{i} {:?}", t.token_text(i)))
            };
            writeln!(
                out,
                "tokenizer     byte-level BPE, pre '{}', {} tokens",
                t.pre,
                t.vocab_size()
            )?;
            writeln!(out, "bos           {} (added: {})", show(t.bos), t.add_bos)?;
            writeln!(out, "eos           {}", show(t.eos))?;
            writeln!(out, "end of turn   {}", show(t.eot))?;
        }
        Err(e) => writeln!(out, "tokenizer     unsupported: {e:#}")?,
    }
    match meta.str("tokenizer.chat_template") {
        Ok(t) => writeln!(out, "chat template {} bytes of Jinja", t.len())?,
        Err(_) => writeln!(out, "chat template none")?,
    }
    Ok(())
}

pub fn tokenize(path: &Path, text: &str) -> Result<()> {
    let file = open(path)?;
    let ids = tokenizer(&file)?.encode(text)?;
    println!("{}", serde_json::to_string(&ids)?);
    Ok(())
}

pub fn generate(args: &GenerateArgs) -> Result<()> {
    let sampling = SamplingParams {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
    };
    sampling.validate()?;
    let spec = DraftSpec::parse(&args.draft)?;
    let file = open(&args.model)?;
    let tok = tokenizer(&file)?;
    let text = if args.chat {
        let meta = &file.header.metadata;
        let source = meta
            .str("tokenizer.chat_template")
            .context("--chat: the model has no chat template (tokenizer.chat_template)")?;
        let template = ChatTemplate::for_tokenizer(source, &tok)?;
        template.render(&[ChatMessage::new("user", &args.prompt)], true)?
    } else {
        args.prompt.clone()
    };
    let prompt = tok.encode(&text)?;
    if prompt.is_empty() {
        bail!("the prompt is empty: give some text with --prompt");
    }
    if let Some(0) = args.context {
        bail!("--context must be at least 1");
    }
    let opts = GenerateOptions {
        max_tokens: args.max_tokens,
        sampling,
        ..GenerateOptions::default()
    };
    match args.backend {
        Backend::Cpu => {
            let file = Arc::new(file);
            let mut model = crate::load_cpu(&file, args.context, args.threads)?;
            eprintln!("[cpu: {}]", crate::cpu_detail(&model));
            let context = model.capacity();
            let backend = DraftBackend::Cpu {
                threads: args.threads,
            };
            let drafter = build_drafter(&spec, &tok, backend, context)?;
            run(&mut model, drafter, &tok, &prompt, opts, args)
        }
        Backend::Reference => {
            let mut model =
                CpuModel::load(&file, args.context).context("cannot load the model's weights")?;
            let context = model.capacity();
            let drafter = build_drafter(&spec, &tok, DraftBackend::Reference, context)?;
            run(&mut model, drafter, &tok, &prompt, opts, args)
        }
        Backend::Gpu => {
            let ctx = crate::open_gpu(args.gpu_kernels)?;
            let mut model = GpuModel::load(&ctx, &file, args.context)
                .context("cannot load the model onto the GPU")?;
            let context = model.capacity();
            let drafter = build_drafter(&spec, &tok, DraftBackend::Gpu(&ctx), context)?;
            run(&mut model, drafter, &tok, &prompt, opts, args)
        }
    }
}

fn run<M: LanguageModel>(
    model: &mut M,
    mut drafter: Option<Box<dyn runahead_speculate::Drafter>>,
    tok: &Tokenizer,
    prompt: &[u32],
    mut opts: GenerateOptions,
    args: &GenerateArgs,
) -> Result<()> {
    opts.depth = depth(&args.depth, model, drafter.is_some())?;
    let mut decoder = tok.decoder();
    let mut stdout = std::io::stdout();
    let stream = !args.json;
    let result = pollster::block_on(generate_with(
        model,
        drafter.as_deref_mut(),
        prompt,
        &opts,
        |t| tok.is_end(t),
        |t, _| {
            if stream && !tok.is_end(t) {
                let piece = decoder.push(t);
                // A closed stdout (e.g. `| head`) is not an error worth aborting generation for.
                let _ = stdout
                    .write_all(piece.as_bytes())
                    .and_then(|_| stdout.flush());
            }
            ControlFlow::Continue(())
        },
    ))?;
    let s = &result.stats;
    if args.json {
        let out = generation_json(&result, tok, args.backend.name(), &args.draft);
        println!("{out}");
    } else {
        let _ = stdout.write_all(decoder.finish().as_bytes());
        println!();
        eprintln!(
            "[{} prompt tokens, {} generated in {:.2} s ({:.2} tokens/s), prefill {:.2} s, backend {}, stop: {}; draft {}: {} target forwards, {}/{} drafted tokens accepted]",
            s.prompt_tokens,
            s.generated_tokens,
            s.decode_seconds,
            s.tokens_per_second(),
            s.prefill_seconds,
            args.backend.name(),
            result.stop.as_str(),
            args.draft,
            s.target_forwards,
            s.accepted,
            s.drafted,
        );
    }
    Ok(())
}
