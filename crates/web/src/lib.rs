//! The browser surface of runahead: an `Engine` class exported with wasm-bindgen over the GPU
//! engine (WebGPU) or the CPU engine (wasm `simd128`; see [`backend`]), the tokenizer and the
//! generation loop. Nothing else lives here: the npm
//! package (`pkg/`) wraps this class in a friendlier API, and every engine behaviour is tested
//! in the crates that own it.
//!
//! Errors reach JavaScript as `Error` objects with a stable `code` (see [`error::Code`]); no
//! input a page can pass makes this crate panic (a panic would kill the wasm instance).

#![forbid(unsafe_code)]

mod backend;
mod cpu_forward_cost;
mod device;
mod draft;
mod error;
mod forward_cost;
mod generation;
mod model_stream;
mod options;
mod pacing;
mod probe;
mod session;
mod threads;
mod tools;

use std::cell::{Cell, RefCell};
use std::ops::ControlFlow;
use std::rc::Rc;
use std::sync::Arc;

use runahead_cpu::{CpuEngine, CpuOptions};
use runahead_gguf::GgufFile;
use runahead_gpu::{GpuContext, GpuModel};
use runahead_model::LanguageModel;
use runahead_speculate::{logprob_json, Constraint, Piece, Provenance, TokenLogprob};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::backend::Choice;
use crate::draft::DraftInfo;
use crate::error::{Code, WebError};
use crate::generation::Drafters;
pub use crate::model_stream::ModelStream;
use crate::options::{GenerateOptions, GrammarOption, LoadOptions};
use crate::pacing::{Paced, Turn};
use crate::session::{ModelInfo, Session};
use crate::tools::ToolRequest;

/// What a generation needs exclusive use of.
struct Loaded {
    model: Model,
    drafters: Drafters,
}

/// The engine the weights went to, paced so the page gets a turn before every forward.
#[allow(clippy::large_enum_variant)] // one per engine, made once and never copied
enum Model {
    /// With its device, which a draft model loads onto too.
    Gpu {
        model: Paced<GpuModel>,
        ctx: GpuContext,
    },
    /// Over the GGUF bytes themselves (shared, not copied).
    Cpu(Paced<CpuEngine>),
}

impl Model {
    /// KV cache size, in tokens.
    fn capacity(&self) -> usize {
        match self {
            Model::Gpu { model, .. } => model.capacity(),
            Model::Cpu(model) => model.capacity(),
        }
    }
}

/// The CPU engine's options for a model with a KV cache of `context` tokens on `threads`
/// threads (more than one only in the threaded build: [`threads::cpu_threads`]).
fn cpu_options(context: usize, threads: usize) -> CpuOptions {
    CpuOptions {
        context: Some(context),
        threads: Some(threads),
        isa: None,
    }
}

/// `engine.info()`: the target's description, with the draft model's when one is loaded.
#[derive(Serialize)]
struct Info<'a> {
    #[serde(flatten)]
    model: &'a ModelInfo,
    #[serde(skip_serializing_if = "Option::is_none")]
    draft: Option<&'a DraftInfo>,
}

/// KV cache size when `context` is not given, as the GPU engine's (capped by the model's
/// trained context); the CPU engine's cache grows with use up to it.
const CPU_DEFAULT_CONTEXT: usize = 4096;

/// A model loaded onto the GPU or the CPU engine, ready to generate.
#[wasm_bindgen]
pub struct Engine {
    session: Rc<Session>,
    /// The weights, KV cache and drafters; taken out while a generation runs, which is what
    /// makes a second `generate` fail with "busy" instead of interleaving with the first.
    slot: Rc<RefCell<Option<Loaded>>>,
    /// Set by `cancel()`, read after every verified token.
    cancel: Rc<Cell<bool>>,
    /// The draft model's description, once one is loaded.
    draft: Rc<RefCell<Option<DraftInfo>>>,
}

#[wasm_bindgen]
impl Engine {
    /// Reads the GGUF bytes and loads the model onto WebGPU (a device opened, limits checked,
    /// weights uploaded) or the CPU engine. `options`: `{context?: number, backend?: 'auto' |
    /// 'webgpu' | 'cpu', threads?: number}` (KV cache size in tokens; `auto`, the default, takes
    /// WebGPU when its adapter is a hardware one with sufficient limits, else the CPU engine;
    /// the CPU engine's threads, default 1, more only in the threaded build: [`threads`]).
    pub async fn load(bytes: Vec<u8>, options: JsValue) -> Result<Engine, JsValue> {
        console_error_panic_hook::set_once();
        Ok(load_engine(bytes, &options).await?)
    }

    /// Like `load`, from a stream of the file's bytes ([`ModelStream`]; `size`: the file's, 0
    /// when unknown): on WebGPU the weights go to the GPU as they arrive and the page never
    /// holds the file. The options are checked now, before any byte is read.
    #[wasm_bindgen(js_name = streamModel)]
    pub fn stream_model(size: f64, options: JsValue) -> Result<ModelStream, JsValue> {
        console_error_panic_hook::set_once();
        Ok(ModelStream::for_target(Some(size), &options)?)
    }

    /// Architecture, sizes, tensor types, special tokens, whether a chat template is present,
    /// the backend (`webgpu` or `cpu`, with the reason when `auto` fell back to the CPU), the
    /// adapter in use, and `draft` (name, architecture, parameters, ...) once a draft model is
    /// loaded.
    pub fn info(&self) -> Result<JsValue, JsValue> {
        let draft = self.draft.borrow();
        Ok(to_js(&Info {
            model: &self.session.info,
            draft: draft.as_ref(),
        })?)
    }

    /// Loads a draft model (GGUF bytes) onto this model's engine (the same WebGPU device, or
    /// the CPU engine) with this model's KV cache size, after checking that its tokenizer is
    /// this model's (`draft_mismatch` otherwise); then `draft: "model"` drafts with it and
    /// `draft: "auto"` weighs it against the suffix lookup. Returns its description (what
    /// `info().draft` gives). `busy` while a generation runs.
    #[wasm_bindgen(js_name = loadDraft)]
    pub fn load_draft(&self, bytes: Vec<u8>) -> Result<JsValue, JsValue> {
        Ok(self.attach_draft(bytes)?)
    }

    /// Like `loadDraft`, from a stream of the draft file's bytes ([`ModelStream`], ended with
    /// `finishDraft()`): its tokenizer is checked against this model's once its header is in,
    /// before any weight is read.
    #[wasm_bindgen(js_name = streamDraft)]
    pub fn stream_draft(&self, size: f64) -> Result<ModelStream, JsValue> {
        Ok(ModelStream::for_draft(Some(size), self)?)
    }

    /// Token ids of `text`, tokenized as is (control tokens in the text are recognized).
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>, JsValue> {
        let ids = self
            .session
            .tokenizer
            .encode(text)
            .map_err(WebError::from)?;
        Ok(ids)
    }

    /// Generates a continuation of `prompt` (a string, or an array of messages `{role,
    /// content}` rendered by the model's chat template with the assistant's turn opened) and
    /// resolves to `{tokens, text, stats}`, the object `runahead generate --json` prints.
    /// `options`: `{maxTokens, temperature, topK, topP, seed, draft, depth, chat, stop,
    /// grammar, logprobs, topLogprobs, frequencyPenalty, presencePenalty, logitBias, tools,
    /// toolChoice, parallelToolCalls}` (`grammar`: `{lark}`, `{regex}` or `{jsonSchema}`, the
    /// output must match it; with `logprobs` the result has one `logprobs` entry per token;
    /// with `tools` and a `toolChoice` other than `"none"` it has `content` and `tool_calls`).
    /// `onToken(text, tokenId, fromDraft, {provenance, logprob})` is called for every verified
    /// token (and once with `tokenId` undefined for text held back for a stop string until the
    /// end; `logprob` only with `logprobs`); returning `false` stops the generation like
    /// `cancel()` does.
    pub fn generate(
        &self,
        prompt: JsValue,
        options: JsValue,
        on_token: Option<js_sys::Function>,
    ) -> js_sys::Promise {
        // Taken synchronously, so `generate(); cancel();` in one turn cancels this generation
        // and a second `generate` is refused before it could reset the flag.
        let Some(mut loaded) = self.slot.borrow_mut().take() else {
            return js_sys::Promise::reject(&busy());
        };
        self.cancel.set(false);
        let session = self.session.clone();
        let slot = self.slot.clone();
        let cancel = self.cancel.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let result = run_generation(
                &mut loaded,
                &session,
                &prompt,
                &options,
                on_token.as_ref(),
                &cancel,
            )
            .await;
            *slot.borrow_mut() = Some(loaded);
            Ok(result?)
        })
    }

    /// Names the record of earlier outputs this model reads and writes: the tokenizer's
    /// fingerprint, hex (a page stores one record per key).
    #[wasm_bindgen(getter, js_name = historyKey)]
    pub fn history_key(&self) -> String {
        format!("{:016x}", self.session.history_key)
    }

    /// The suffix drafter's earlier outputs as a versioned, checksummed record (for the page
    /// to persist); `busy` while a generation runs.
    #[wasm_bindgen(js_name = exportHistory)]
    pub fn export_history(&self) -> Result<Vec<u8>, JsValue> {
        let slot = self.slot.borrow();
        let loaded = slot.as_ref().ok_or_else(busy)?;
        Ok(loaded.drafters.export_history(self.session.history_key))
    }

    /// Adds the earlier outputs of a record `exportHistory` wrote for this model; resolves
    /// the number of outputs. A record of another model or version, or a damaged one, is the
    /// error `history` and adds nothing.
    #[wasm_bindgen(js_name = importHistory)]
    pub fn import_history(&self, record: &[u8]) -> Result<u32, JsValue> {
        let mut slot = self.slot.borrow_mut();
        let loaded = slot.as_mut().ok_or_else(busy)?;
        let vocab = self.session.tokenizer.vocab_size();
        let added = loaded
            .drafters
            .import_history(record, self.session.history_key, vocab)
            .map_err(|e| WebError::new(Code::History, e.to_string()))?;
        Ok(u32::try_from(added).unwrap_or(u32::MAX))
    }

    /// Forgets every earlier output; `busy` while a generation runs.
    #[wasm_bindgen(js_name = clearHistory)]
    pub fn clear_history(&self) -> Result<(), JsValue> {
        let mut slot = self.slot.borrow_mut();
        slot.as_mut().ok_or_else(busy)?.drafters.clear_history();
        Ok(())
    }

    /// Stops the running generation after the token being verified; its promise resolves with
    /// `stats.stop_reason == "cancelled"` and the engine stays usable. No-op when idle.
    pub fn cancel(&self) {
        self.cancel.set(true);
    }

    /// What one forward costs this page: on the GPU engine its host, measured like `runahead bench
    /// --backend gpu` does natively: `prompt` (text, tokenized as is) is prefilled, then
    /// `options.reps` forwards of each of `options.rows` rows run behind it (default `{rows: [1,
    /// 8], reps: 10}`). Resolves to `{adapter, prompt_tokens, dispatches_per_forward,
    /// host_cost: [{rows, dispatches, encode_submit_ms, wait_ms, calls_encode_submit,
    /// calls_wait, staging_writes, reps}]}` (medians); the calls are counted when
    /// `countCalls()` returns the instance's running count of wasm -> JS calls. On the CPU
    /// engine, each block's wall time instead: `{backend: "cpu", kernels, relaxed_simd,
    /// threads, prompt_tokens, forwards: [{rows, median_ms, min_ms, median_vs_one_row,
    /// reps}]}` (rows 1 to 32). `busy` while a generation runs.
    #[wasm_bindgen(js_name = forwardCost)]
    pub fn forward_cost(
        &self,
        prompt: String,
        options: JsValue,
        count_calls: Option<js_sys::Function>,
    ) -> js_sys::Promise {
        let Some(mut loaded) = self.slot.borrow_mut().take() else {
            return js_sys::Promise::reject(&busy());
        };
        let session = self.session.clone();
        let slot = self.slot.clone();
        wasm_bindgen_futures::future_to_promise(async move {
            let result = match &mut loaded.model {
                Model::Gpu { model, .. } => forward_cost::measure(
                    &mut model.inner,
                    &session,
                    &prompt,
                    &options,
                    count_calls.as_ref(),
                )
                .await
                .and_then(|cost| to_js(&cost)),
                Model::Cpu(model) => cpu_forward_cost::measure(model, &session, &prompt, &options)
                    .await
                    .and_then(|cost| to_js(&cost)),
            };
            *slot.borrow_mut() = Some(loaded);
            Ok(result?)
        })
    }

    /// Whether a generation is running.
    #[wasm_bindgen(getter, js_name = isGenerating)]
    pub fn is_generating(&self) -> bool {
        self.slot.borrow().is_none()
    }
}

impl Engine {
    fn attach_draft(&self, bytes: Vec<u8>) -> Result<JsValue, WebError> {
        let mut slot = self.slot.borrow_mut();
        let loaded = slot.as_mut().ok_or_else(busy_error)?;
        let file = GgufFile::from_bytes(bytes)?;
        let tokenizer = &self.session.tokenizer;
        // Before any weight is loaded: a draft of another vocabulary costs no upload.
        let mut info = draft::check(tokenizer, &file.header)?;
        let (drafter, context) = draft::load(&loaded.model, tokenizer, file)?;
        info.context = context;
        loaded.drafters.set_draft_model(drafter);
        let out = to_js(&info)?;
        *self.draft.borrow_mut() = Some(info);
        Ok(out)
    }
}

/// `Engine.load`'s options, checked before any byte of the model is read.
struct TargetOptions {
    context: Option<usize>,
    backend: backend::BackendOption,
    history_tokens: usize,
    threads: threads::Threads,
}

impl TargetOptions {
    fn from_js(options: &JsValue) -> Result<Self, WebError> {
        let options: LoadOptions = options::from_js(options)?;
        if options.context == Some(0) {
            return Err(WebError::new(
                Code::InvalidOption,
                "context must be at least 1",
            ));
        }
        let history_tokens = options
            .history_tokens
            .unwrap_or(options::DEFAULT_HISTORY_TOKENS);
        if history_tokens > options::MAX_HISTORY_TOKENS {
            return Err(WebError::new(
                Code::InvalidOption,
                format!(
                    "historyTokens: at most {} (got {history_tokens})",
                    options::MAX_HISTORY_TOKENS
                ),
            ));
        }
        Ok(TargetOptions {
            context: options.context,
            backend: options.backend,
            history_tokens,
            threads: threads::cpu_threads(options.threads, threads::Place::here())?,
        })
    }

    /// The GPU engine's model, once its weights are on `ctx`.
    fn gpu(
        &self,
        session: &mut Session,
        model: GpuModel,
        ctx: GpuContext,
    ) -> Result<Model, WebError> {
        ctx.check()?;
        session.set_engine(model.capacity(), &ctx.adapter_info);
        Ok(Model::Gpu {
            model: Paced {
                inner: model,
                turn: Turn::First,
            },
            ctx,
        })
    }

    /// The CPU engine over `file`; `reason`: why `auto` did not take WebGPU.
    fn cpu(
        &self,
        session: &mut Session,
        file: GgufFile,
        reason: Option<String>,
    ) -> Result<Model, WebError> {
        let threads = &self.threads;
        let context = self.context.unwrap_or(CPU_DEFAULT_CONTEXT);
        let engine = CpuEngine::load(Arc::new(file), &cpu_options(context, threads.count))?;
        let plural = if threads.count == 1 { "" } else { "s" };
        let kernels = format!(
            "CPU engine ({}, {} thread{plural})",
            engine.isa().name(),
            threads.count
        );
        session.set_engine(engine.capacity(), &kernels);
        session.info.backend = "cpu";
        session.info.backend_reason = reason;
        session.info.threads = Some(threads.count);
        session.info.threads_reason = threads.reason.clone();
        Ok(Model::Cpu(Paced {
            inner: engine,
            turn: Turn::Fair,
        }))
    }

    /// The engine over `model`.
    fn engine(&self, session: Session, model: Model) -> Engine {
        Engine {
            session: Rc::new(session),
            slot: Rc::new(RefCell::new(Some(Loaded {
                model,
                drafters: Drafters::new(self.history_tokens),
            }))),
            cancel: Rc::new(Cell::new(false)),
            draft: Rc::new(RefCell::new(None)),
        }
    }
}

async fn load_engine(bytes: Vec<u8>, options: &JsValue) -> Result<Engine, WebError> {
    let target = TargetOptions::from_js(options)?;
    let choice = backend::choose(target.backend).await;
    let file = GgufFile::from_bytes(bytes)?;
    let mut session = Session::new(&file.header)?;
    let model = match choice {
        Choice::Webgpu => {
            // The device checkWebGpu() opened before the model was fetched, or a new one
            // (no_webgpu / adapter_limits when there is none).
            let ctx = device::open().await?;
            let model = GpuModel::load(&ctx, &file, target.context)?;
            target.gpu(&mut session, model, ctx)?
        }
        Choice::Cpu { reason } => target.cpu(&mut session, file, reason)?,
    };
    Ok(target.engine(session, model))
}

async fn run_generation(
    loaded: &mut Loaded,
    session: &Session,
    prompt: &JsValue,
    options: &JsValue,
    on_token: Option<&js_sys::Function>,
    cancel: &Cell<bool>,
) -> Result<JsValue, WebError> {
    let opts: GenerateOptions = options::from_js(options)?;
    generation::validate(&opts)?;
    let tools = ToolRequest::from_options(&opts)?;
    let tool_list = tools.as_ref().map_or(&[][..], |t| &t.tools[..]);
    let prompt = session.prompt_tokens(&options::prompt_from_js(prompt)?, opts.chat, tool_list)?;
    // Where a reply may call tools: how calls are spelled, and the grammar they follow.
    let tool_syntax = match &tools {
        Some(t) if t.choice.is_some() => Some(session.tool_syntax()?),
        _ => None,
    };
    let tool_grammar = match (&tools, tool_syntax) {
        (Some(t), Some(syntax)) => t.grammar(syntax)?.map(|lark| GrammarOption {
            lark: Some(lark),
            ..GrammarOption::default()
        }),
        _ => None,
    };
    // Compiled before the model runs: a bad schema or grammar costs no forward.
    let mut grammar = tool_grammar
        .as_ref()
        .or(opts.grammar.as_ref())
        .map(|g| session.grammar(g))
        .transpose()?;
    let mut thrown = None;
    let tokenizer = &session.tokenizer;
    let mut call = |args: js_sys::Array| -> ControlFlow<()> {
        let Some(f) = on_token else {
            return ControlFlow::Continue(());
        };
        match f.apply(&JsValue::NULL, &args) {
            Ok(v) if v.as_bool() == Some(false) => ControlFlow::Break(()),
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => {
                thrown = Some(e);
                ControlFlow::Break(())
            }
        }
    };
    let on_piece = |piece: Piece<'_>| {
        if on_token.is_some() {
            let mut text = piece.text;
            // Text an end token releases is text held back for a stop string: it goes out as
            // a piece of its own first, so the end token's chunk has no text (as without stop
            // strings) and a stream's log-probabilities stay with the text they belong to.
            if piece.token.is_some_and(|t| tokenizer.is_end(t)) && !text.is_empty() {
                let held = js_sys::Array::of4(
                    &JsValue::from(text),
                    &JsValue::UNDEFINED,
                    &JsValue::FALSE,
                    &piece_info(Provenance::Target, None, tokenizer),
                );
                call(held)?;
                text = "";
            }
            let args = js_sys::Array::of4(
                &JsValue::from(text),
                &piece.token.map_or(JsValue::UNDEFINED, JsValue::from),
                &JsValue::from(piece.provenance != Provenance::Target),
                &piece_info(piece.provenance, piece.logprob, tokenizer),
            );
            call(args)?;
        }
        if cancel.get() {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let drafters = &mut loaded.drafters;
    let constraint = grammar.as_mut().map(|g| g as &mut dyn Constraint);
    let (prompt, opts) = (&prompt, &opts);
    let mut out = match &mut loaded.model {
        Model::Gpu { model, .. } => {
            let run = generation::run_constrained;
            run(
                model, tokenizer, prompt, opts, constraint, drafters, "gpu", on_piece,
            )
            .await?
        }
        Model::Cpu(model) => {
            let run = generation::run_constrained;
            run(
                model, tokenizer, prompt, opts, constraint, drafters, "cpu", on_piece,
            )
            .await?
        }
    };
    if let Some(cause) = thrown {
        let what = cause
            .dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| cause.as_string())
            .unwrap_or_else(|| "a non-Error value".into());
        return Err(WebError {
            code: Code::Callback,
            message: format!("the onToken callback threw: {what}"),
            cause: Some(cause),
        });
    }
    if let Some(syntax) = tool_syntax {
        tools::split_reply(&mut out, syntax);
    }
    to_js(&out)
}

/// What `onToken` gets besides the text, the token and whether it came from a draft:
/// `{provenance: 'draft' | 'forced' | 'target', logprob?}`, `logprob` (with the `logprobs`
/// option) the token's entry of the result's `logprobs`.
fn piece_info(
    provenance: Provenance,
    logprob: Option<&TokenLogprob>,
    tokenizer: &runahead_model::Tokenizer,
) -> JsValue {
    let info = js_sys::Object::new();
    let provenance = match provenance {
        Provenance::Draft => "draft",
        Provenance::Forced => "forced",
        Provenance::Target => "target",
    };
    // Setting a property on a fresh plain object cannot fail.
    let _ = js_sys::Reflect::set(&info, &"provenance".into(), &provenance.into());
    if let Some(lp) = logprob {
        if let Ok(value) = to_js(&logprob_json(lp, tokenizer)) {
            let _ = js_sys::Reflect::set(&info, &"logprob".into(), &value);
        }
    }
    info.into()
}

/// The error of a call that needs the model while a generation holds it.
fn busy_error() -> WebError {
    WebError::new(
        Code::Busy,
        "a generation is already running: await it or cancel() it first",
    )
}

fn busy() -> JsValue {
    busy_error().into()
}

/// A plain JavaScript object with the same fields.
fn to_js(value: &impl Serialize) -> Result<JsValue, WebError> {
    let json = serde_json::to_string(value)
        .map_err(|e| WebError::new(Code::Internal, format!("serializing a result: {e}")))?;
    js_sys::JSON::parse(&json)
        .map_err(|_| WebError::new(Code::Internal, "parsing a serialized result"))
}
