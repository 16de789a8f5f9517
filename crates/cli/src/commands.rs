use std::collections::BTreeMap;
use std::io::Write;
use std::ops::ControlFlow;
use std::path::Path;

use anyhow::{bail, Context, Result};
use runahead_grammar::{Grammar, GrammarSpec, Vocabulary};
use runahead_model::tools::{parse_reply, parse_tools, tool_grammar, Tool, ToolChoice, ToolSyntax};
use runahead_model::{
    model_template, ChatMessage, LanguageModel, ModelTemplate, Plan, Step, Tokenizer,
};
use runahead_speculate::{
    generate_text_constrained, generation_json, Constraint, Depth, Drafter, GenerateOptions,
    KvTokens, StopStrings,
};

use crate::drafting::DraftSpec;
use crate::engine::{chat_template, open, tokenizer, with_engine, EngineTask};
use crate::GenerateArgs;

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
    match Plan::from_header(&file.header) {
        Ok(plan) => {
            let c = &plan.config;
            let steps: Vec<_> = plan.steps().iter().map(|s| s.describe()).collect();
            writeln!(out, "architecture  {}", c.arch.name())?;
            if !steps.is_empty() {
                writeln!(out, "steps         {}", steps.join("; "))?;
            }
            // Each engine in one line: it runs the model, or the step it lacks.
            for (engine, implemented) in [
                ("f32 reference", Step::ALL),
                ("CPU engine", runahead_cpu::STEPS),
                ("GPU engine", runahead_gpu::STEPS),
            ] {
                match plan.require(engine, implemented) {
                    Ok(()) => writeln!(out, "{engine:<13} runs it")?,
                    Err(e) => writeln!(out, "{engine:<13} refuses it: {e}")?,
                }
            }
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
    match model_template(meta) {
        Some(ModelTemplate {
            builtin: Some(name),
            ..
        }) => writeln!(out, "chat template built-in {name} (the file has none)")?,
        Some(t) => writeln!(out, "chat template {} bytes of Jinja", t.source.len())?,
        None => writeln!(out, "chat template none")?,
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
    let (opts, stop) = args.sample.options()?;
    DraftSpec::parse(&args.engine.draft)?;
    let file = open(&args.engine.model)?;
    let tok = tokenizer(&file)?;
    // A rendered chat prompt may already start with the BOS text the tokenizer adds:
    // `encode_rendered` keeps one BOS, as llama.cpp does.
    let tools = read_tools(args)?;
    let mut tool_syntax = None;
    let prompt = if args.chat {
        let template = chat_template(&file, &tok, "--chat")?;
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(ChatMessage::new("system", system));
        }
        messages.push(ChatMessage::new("user", &args.prompt));
        if args.tools.is_some() {
            tool_syntax = Some(template.tool_syntax());
        }
        tok.encode_rendered(&template.render_conversation_with_tools(&messages, &tools)?)?
    } else {
        tok.encode(&args.prompt)?
    };
    if prompt.is_empty() {
        bail!("the prompt is empty: give some text with --prompt");
    }
    let grammar = match tool_syntax {
        Some(syntax) => tools_constraint(args, syntax, &tools, &tok)?,
        None => constraint(args, &tok)?,
    };
    let task = Generate {
        tok: &tok,
        prompt: &prompt,
        opts,
        stop,
        grammar,
        tool_syntax,
        args,
    };
    with_engine(&args.engine, file, &tok, task)
}

/// One generation, streamed to stdout or printed as JSON.
struct Generate<'a> {
    tok: &'a Tokenizer,
    prompt: &'a [u32],
    opts: GenerateOptions,
    stop: StopStrings,
    grammar: Option<Grammar>,
    /// With --tools: how the reply spells its calls.
    tool_syntax: Option<ToolSyntax>,
    args: &'a GenerateArgs,
}

/// The tools of `--tools`, checked (none without it).
fn read_tools(args: &GenerateArgs) -> Result<Vec<Tool>> {
    let Some(path) = &args.tools else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--tools: cannot read {}", path.display()))?;
    let tools: Vec<serde_json::Value> = serde_json::from_str(&text)
        .with_context(|| format!("--tools {}: expected a JSON array", path.display()))?;
    Ok(parse_tools(&tools)?)
}

/// The grammar `--tool-choice` asks for (none for `auto` on a template with its own syntax).
fn tools_constraint(
    args: &GenerateArgs,
    syntax: ToolSyntax,
    tools: &[Tool],
    tok: &Tokenizer,
) -> Result<Option<Grammar>> {
    let choice = match args.tool_choice.as_str() {
        "auto" => ToolChoice::Auto,
        "required" => ToolChoice::Required,
        name => ToolChoice::Function(name.to_owned()),
    };
    let Some(lark) = tool_grammar(syntax, tools, &choice, args.parallel_tool_calls)? else {
        return Ok(None);
    };
    let vocab = Vocabulary::new(tok).context("--tools")?;
    let grammar = Grammar::new(&vocab, &GrammarSpec::Lark(lark)).context("--tools")?;
    Ok(Some(grammar))
}

/// The grammar `--json-schema` or `--grammar` gives, compiled over the model's vocabulary
/// (a bad schema or grammar fails here, before the model loads).
fn constraint(args: &GenerateArgs, tok: &Tokenizer) -> Result<Option<Grammar>> {
    let (flag, path) = match (&args.json_schema, &args.grammar) {
        (Some(p), _) => ("--json-schema", p),
        (None, Some(p)) => ("--grammar", p),
        (None, None) => return Ok(None),
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{flag}: cannot read {}", path.display()))?;
    let spec = if args.json_schema.is_some() {
        GrammarSpec::JsonSchema(text)
    } else {
        GrammarSpec::Lark(text)
    };
    let vocab = Vocabulary::new(tok).with_context(|| flag.to_string())?;
    let grammar =
        Grammar::new(&vocab, &spec).with_context(|| format!("{flag} {}", path.display()))?;
    Ok(Some(grammar))
}

impl EngineTask for Generate<'_> {
    fn run<M: LanguageModel>(
        mut self,
        model: &mut M,
        mut drafter: Option<Box<dyn Drafter>>,
        depth: Depth,
    ) -> Result<()> {
        let (tok, args) = (self.tok, self.args);
        self.opts.depth = depth;
        let mut stdout = std::io::stdout();
        let stream = !args.json;
        let constraint = self.grammar.as_mut().map(|g| g as &mut dyn Constraint);
        let result = pollster::block_on(generate_text_constrained(
            model,
            drafter.as_deref_mut(),
            &mut KvTokens::default(),
            self.prompt,
            &self.opts,
            constraint,
            tok,
            &self.stop,
            |piece| {
                if stream {
                    // A closed stdout (e.g. `| head`) is not an error worth aborting for.
                    let _ = stdout
                        .write_all(piece.text.as_bytes())
                        .and_then(|_| stdout.flush());
                }
                ControlFlow::Continue(())
            },
        ))?;
        let s = &result.stats;
        let backend = args.engine.backend.name();
        if args.json {
            let mut out = generation_json(&result, tok, backend, &args.engine.draft);
            if let (Some(syntax), Some(fields)) = (self.tool_syntax, out.as_object_mut()) {
                let text = result.text.clone().unwrap_or_else(|| {
                    let kept: Vec<u32> = result
                        .tokens
                        .iter()
                        .copied()
                        .filter(|&t| !tok.is_end(t))
                        .collect();
                    tok.decode(&kept)
                });
                let reply = parse_reply(syntax, &text);
                let calls: Vec<serde_json::Value> = reply
                    .calls
                    .iter()
                    .map(|c| serde_json::json!({"name": c.name, "arguments": c.arguments}))
                    .collect();
                fields.insert("content".into(), reply.content.into());
                fields.insert("tool_calls".into(), calls.into());
            }
            println!("{out}");
        } else {
            println!();
            eprintln!(
                "[{} prompt tokens, {} generated in {:.2} s ({:.2} tokens/s), prefill {:.2} s, backend {}, stop: {}; draft {}: {} target forwards, {}/{} drafted tokens accepted]",
                s.prompt_tokens,
                s.generated_tokens,
                s.decode_seconds,
                s.tokens_per_second(),
                s.prefill_seconds,
                backend,
                result.stop.as_str(),
                args.engine.draft,
                s.target_forwards,
                s.accepted,
                s.drafted,
            );
            if s.masks > 0 {
                eprintln!(
                    "[grammar: {} masks, {:.1} us per mask]",
                    s.masks,
                    s.mean_mask_seconds() * 1e6,
                );
            }
        }
        Ok(())
    }
}
