//! `runahead chat`: a conversation on one loaded engine. Each line read from stdin is a user
//! message; the whole conversation is rendered by the model's chat template and generated from,
//! and the engine's cache of the previous turns is kept ([`KvTokens`]), so a turn prefills only
//! what is new: the end of the last answer, the new message and the template's glue.

use std::io::{BufRead, IsTerminal, Write};
use std::ops::ControlFlow;

use anyhow::Result;
use runahead_model::{ChatMessage, ChatTemplate, LanguageModel, Tokenizer};
use runahead_speculate::{
    generate_text, Depth, Drafter, GenerateOptions, Generation, KvTokens, StopStrings,
};

use crate::drafting::DraftSpec;
use crate::engine::{
    chat_template, open, tokenizer, with_engine, EngineArgs, EngineTask, SampleArgs,
};

#[derive(clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct ChatArgs {
    #[command(flatten)]
    engine: EngineArgs,
    /// A system message at the start of the conversation.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    #[command(flatten)]
    sample: SampleArgs,
    /// After each answer, print the turn's prompt tokens, cached tokens and speed to stderr.
    #[arg(long)]
    stats: bool,
}

pub fn run(args: &ChatArgs) -> Result<()> {
    let (opts, stop) = args.sample.options()?;
    DraftSpec::parse(&args.engine.draft)?;
    let file = open(&args.engine.model)?;
    let tok = tokenizer(&file)?;
    let template = chat_template(&file, &tok, "chat")?;
    let repl = Repl {
        tok: &tok,
        template,
        opts,
        stop,
        args,
    };
    with_engine(&args.engine, file, &tok, repl)
}

struct Repl<'a> {
    tok: &'a Tokenizer,
    template: ChatTemplate,
    opts: GenerateOptions,
    stop: StopStrings,
    args: &'a ChatArgs,
}

impl EngineTask for Repl<'_> {
    fn run<M: LanguageModel>(
        mut self,
        model: &mut M,
        mut drafter: Option<Box<dyn Drafter>>,
        depth: Depth,
    ) -> Result<()> {
        self.opts.depth = depth;
        let mut messages: Vec<ChatMessage> = self
            .args
            .system
            .iter()
            .map(|s| ChatMessage::new("system", s))
            .collect();
        let mut cached = KvTokens::default();
        let stdin = std::io::stdin();
        let interactive = stdin.is_terminal();
        let mut stdout = std::io::stdout();
        for turn in 1.. {
            if interactive {
                eprint!("> ");
            }
            let mut line = String::new();
            if stdin.lock().read_line(&mut line)? == 0 {
                break;
            }
            let line = line.trim_end_matches(['\n', '\r']);
            if line.trim().is_empty() {
                continue;
            }
            messages.push(ChatMessage::new("user", line));
            let prompt = self
                .tok
                .encode_rendered(&self.template.render_conversation(&messages)?)?;
            let result = pollster::block_on(generate_text(
                model,
                drafter.as_deref_mut(),
                &mut cached,
                &prompt,
                &self.opts,
                self.tok,
                &self.stop,
                |piece| {
                    let _ = stdout
                        .write_all(piece.text.as_bytes())
                        .and_then(|_| stdout.flush());
                    ControlFlow::Continue(())
                },
            ))?;
            println!();
            if self.args.stats {
                print_stats(turn, &result);
            }
            messages.push(ChatMessage::new("assistant", &answer(&result, self.tok)));
            // What adaptive depth learned of the device and the drafters serves the next turn.
            if matches!(result.depth, Depth::Adaptive(_)) {
                self.opts.depth = result.depth;
            }
        }
        Ok(())
    }
}

/// The answer's text as the conversation keeps it: before a stop string, without end tokens.
fn answer(result: &Generation, tok: &Tokenizer) -> String {
    result.text.clone().unwrap_or_else(|| {
        let text: Vec<u32> = result
            .tokens
            .iter()
            .copied()
            .filter(|&t| !tok.is_end(t))
            .collect();
        tok.decode(&text)
    })
}

fn print_stats(turn: usize, result: &Generation) {
    let s = &result.stats;
    eprintln!(
        "[turn {turn}: {} prompt tokens, {} cached, {} prefilled in {:.2} s; {} generated at {:.2} tokens/s; stop: {}; {}/{} drafted tokens accepted]",
        s.prompt_tokens,
        s.cached_tokens,
        s.prompt_tokens - s.cached_tokens,
        s.prefill_seconds,
        s.generated_tokens,
        s.tokens_per_second(),
        result.stop.as_str(),
        s.accepted,
        s.drafted,
    );
}
