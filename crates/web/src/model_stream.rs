//! A model given to the engine as its bytes arrive (from the network, the model cache, a File or
//! the caller's bytes), chunk by chunk. Once the header is in, the engine is chosen and built:
//! on WebGPU every later byte goes from its chunk straight to its GPU buffer
//! ([`runahead_gpu::WeightStream`]), so the page never holds the file; the CPU engine, which
//! reads its weights from WebAssembly memory, gathers the file there, once.

use std::cell::RefCell;
use std::rc::Rc;

use runahead_gguf::{Gguf, GgufFile};
use runahead_gpu::{GpuContext, GpuModel, WeightStream};
use runahead_model::LanguageModel;
use wasm_bindgen::prelude::*;

use crate::backend::{self, Choice};
use crate::draft::{self, DraftInfo};
use crate::error::{Code, WebError};
use crate::session::Session;
use crate::{busy_error, device, probe, to_js, Engine, Loaded, Model, TargetOptions};

/// `Engine.streamModel(size, options)` or `engine.streamDraft(size)`, then `await
/// stream.write(offset, chunk)` for every chunk in order, then `stream.finish()` (the `Engine`)
/// or `stream.finishDraft()` (the draft's description). A write resolves once its bytes are
/// where they go: its promise is what keeps a fast download from queueing more than the GPU
/// takes.
#[wasm_bindgen]
pub struct ModelStream {
    /// `None` while a write is in flight, and for good once one failed.
    stage: Rc<RefCell<Option<Stage>>>,
    /// The file's size, when known.
    size: Option<u64>,
}

#[allow(clippy::large_enum_variant)] // one per load, moved a few times
enum Stage {
    /// The first bytes, until the header parses; `need` is a lower bound of its length.
    Header {
        prefix: Vec<u8>,
        need: u64,
        purpose: Purpose,
    },
    /// On WebGPU: the model is built, its weights arrive.
    Gpu {
        stream: WeightStream,
        ctx: GpuContext,
        then: Then,
    },
    /// For the CPU engine: the file, gathered, and its header (parsed once).
    Cpu {
        bytes: Vec<u8>,
        header: Gguf,
        then: Then,
    },
}

/// What the model is for.
enum Purpose {
    Target(TargetOptions),
    /// A draft model for this engine.
    Draft(EngineParts),
}

/// What finishing takes, decided once the header is read.
#[allow(clippy::large_enum_variant)] // one per load, moved a few times
enum Then {
    Target {
        options: TargetOptions,
        session: Session,
        /// Why `auto` did not take WebGPU.
        reason: Option<String>,
    },
    Draft {
        engine: EngineParts,
        info: DraftInfo,
    },
}

/// The parts of an [`Engine`] a draft model attaches to.
struct EngineParts {
    session: Rc<Session>,
    slot: Rc<RefCell<Option<Loaded>>>,
    draft: Rc<RefCell<Option<DraftInfo>>>,
}

fn fetch_error(message: String) -> WebError {
    WebError::new(Code::Fetch, message)
}

fn resolved() -> js_sys::Promise {
    js_sys::Promise::resolve(&JsValue::UNDEFINED)
}

fn rejected(e: WebError) -> js_sys::Promise {
    js_sys::Promise::reject(&e.into())
}

/// A size or offset from JavaScript, checked to be a whole number of bytes.
fn bytes_count(what: &str, value: f64) -> Result<u64, WebError> {
    if value >= 0.0 && value.fract() == 0.0 && value < 2f64.powi(53) {
        Ok(value as u64)
    } else {
        Err(WebError::new(
            Code::InvalidOption,
            format!("{what} must be a whole number of bytes (got {value})"),
        ))
    }
}

impl ModelStream {
    fn new(size: Option<f64>, purpose: Purpose) -> Result<ModelStream, WebError> {
        // 0: unknown (a download without a length).
        let size = size
            .filter(|&s| s != 0.0)
            .map(|s| bytes_count("the model's size", s))
            .transpose()?;
        Ok(ModelStream {
            stage: Rc::new(RefCell::new(Some(Stage::Header {
                prefix: Vec::new(),
                need: 0,
                purpose,
            }))),
            size,
        })
    }

    pub(crate) fn for_target(size: Option<f64>, options: &JsValue) -> Result<Self, WebError> {
        Self::new(size, Purpose::Target(TargetOptions::from_js(options)?))
    }

    pub(crate) fn for_draft(size: Option<f64>, engine: &Engine) -> Result<Self, WebError> {
        let parts = EngineParts {
            session: engine.session.clone(),
            slot: engine.slot.clone(),
            draft: engine.draft.clone(),
        };
        Self::new(size, Purpose::Draft(parts))
    }

    fn take(&self) -> Result<Stage, WebError> {
        self.stage.borrow_mut().take().ok_or_else(|| {
            WebError::new(
                Code::InvalidOption,
                "the model stream is busy with a write that was not awaited, or failed before",
            )
        })
    }
}

#[wasm_bindgen]
impl ModelStream {
    /// Gives the engine the file's bytes at `offset`, which must be where the last chunk ended.
    /// Resolves once they are taken (after the header: once the engine is chosen and built).
    /// Rejects with `gguf` for a file that is not one, `unsupported_model`, `adapter_limits`,
    /// `out_of_memory`, `fetch` for a chunk out of place; the stream is unusable after.
    pub fn write(&self, offset: f64, chunk: &[u8]) -> js_sys::Promise {
        match self.write_now(offset, chunk) {
            Ok(None) => resolved(),
            Ok(Some(later)) => later,
            Err(e) => rejected(e),
        }
    }

    /// Bytes given so far.
    #[wasm_bindgen(getter)]
    pub fn received(&self) -> f64 {
        match &*self.stage.borrow() {
            Some(Stage::Header { prefix, .. }) => prefix.len() as f64,
            Some(Stage::Gpu { stream, .. }) => stream.received() as f64,
            Some(Stage::Cpu { bytes, .. }) => bytes.len() as f64,
            None => 0.0,
        }
    }

    /// The loaded model, once every byte was written (`fetch` if the file ended early).
    pub fn finish(self) -> Result<Engine, JsValue> {
        let (model, then) = self.finish_model()?;
        match then {
            Then::Target {
                options,
                mut session,
                reason,
            } => {
                let model = match model {
                    Finished::Gpu(model, ctx) => options.gpu(&mut session, model, ctx)?,
                    Finished::Cpu(file) => options.cpu(&mut session, file, reason)?,
                };
                Ok(options.engine(session, model))
            }
            Then::Draft { .. } => Err(WebError::new(
                Code::InvalidOption,
                "a draft model's stream ends with finishDraft()",
            )
            .into()),
        }
    }

    /// Attaches the draft model, once every byte was written, and returns its description
    /// (what `engine.info().draft` gives); `busy` while a generation runs.
    #[wasm_bindgen(js_name = finishDraft)]
    pub fn finish_draft(self) -> Result<JsValue, JsValue> {
        let (model, then) = self.finish_model()?;
        let Then::Draft { engine, mut info } = then else {
            return Err(WebError::new(
                Code::InvalidOption,
                "a target model's stream ends with finish()",
            )
            .into());
        };
        let mut slot = engine.slot.borrow_mut();
        let loaded = slot.as_mut().ok_or_else(busy_error)?;
        let tokenizer = &engine.session.tokenizer;
        let (drafter, context) = match model {
            Finished::Gpu(model, ctx) => draft::gpu_drafter(model, &ctx, tokenizer)?,
            Finished::Cpu(file) => draft::load(&loaded.model, tokenizer, file)?,
        };
        info.context = context;
        loaded.drafters.set_draft_model(drafter);
        let out = to_js(&info)?;
        *engine.draft.borrow_mut() = Some(info);
        Ok(out)
    }
}

/// A model whose bytes are all in.
#[allow(clippy::large_enum_variant)] // one per load, moved once
enum Finished {
    Gpu(GpuModel, GpuContext),
    Cpu(GgufFile),
}

impl ModelStream {
    /// The synchronous part of a write; the promise of what is left, if anything is.
    fn write_now(&self, offset: f64, chunk: &[u8]) -> Result<Option<js_sys::Promise>, WebError> {
        let offset = bytes_count("offset", offset)?;
        if let Some(size) = self.size {
            if offset.saturating_add(chunk.len() as u64) > size {
                return Err(fetch_error(format!(
                    "a chunk of {} bytes at {offset} does not fit in a model of {size} bytes \
                     (did the file change while it was read?)",
                    chunk.len()
                )));
            }
        }
        match self.take()? {
            Stage::Header {
                mut prefix,
                need,
                purpose,
            } => {
                // Grown exactly: a header of some megabytes must not reserve twice its size.
                let _ = prefix.try_reserve_exact(chunk.len());
                append(&mut prefix, offset, chunk)?;
                let have = prefix.len() as u64;
                let complete = self.size.is_some_and(|size| have >= size);
                if have < need && !complete {
                    self.put(Stage::Header {
                        prefix,
                        need,
                        purpose,
                    });
                    return Ok(None);
                }
                let header = match Gguf::parse_prefix(&prefix, self.size.unwrap_or(u64::MAX)) {
                    Ok(header) => header,
                    Err(e) => {
                        let more = probe::need_more(e, have, self.size)?;
                        self.put(Stage::Header {
                            prefix,
                            need: more.need_bytes,
                            purpose,
                        });
                        return Ok(None);
                    }
                };
                let (slot, size) = (self.stage.clone(), self.size);
                let later = wasm_bindgen_futures::future_to_promise(async move {
                    let stage = start(header, prefix, purpose, size).await?;
                    *slot.borrow_mut() = Some(stage);
                    Ok(JsValue::UNDEFINED)
                });
                Ok(Some(later))
            }
            Stage::Gpu {
                mut stream,
                ctx,
                then,
            } => {
                let flushed = stream.write(offset, chunk).map_err(|e| {
                    // A chunk out of place is the download's fault; anything else the device's.
                    match offset != stream.received() {
                        true => fetch_error(e.to_string()),
                        false => e.into(),
                    }
                })?;
                let settle = flushed.then(|| ctx.clone());
                self.put(Stage::Gpu { stream, ctx, then });
                Ok(settle.map(|ctx| {
                    wasm_bindgen_futures::future_to_promise(async move {
                        ctx.settle().await.map_err(WebError::from)?;
                        Ok(JsValue::UNDEFINED)
                    })
                }))
            }
            Stage::Cpu {
                mut bytes,
                header,
                then,
            } => {
                append(&mut bytes, offset, chunk)?;
                self.put(Stage::Cpu {
                    bytes,
                    header,
                    then,
                });
                Ok(None)
            }
        }
    }

    fn put(&self, stage: Stage) {
        *self.stage.borrow_mut() = Some(stage);
    }

    fn finish_model(self) -> Result<(Finished, Then), WebError> {
        let stage = self.take()?;
        let short = |have: u64| {
            self.size.filter(|&size| have < size).map(|size| {
                fetch_error(format!(
                    "only {have} of the model's {size} bytes arrived (the download ended early?)"
                ))
            })
        };
        match stage {
            Stage::Header { prefix, .. } => Err(short(prefix.len() as u64).unwrap_or_else(|| {
                fetch_error(format!(
                    "the model ended after {} bytes, inside its header",
                    prefix.len()
                ))
            })),
            Stage::Gpu { stream, ctx, then } => {
                if let Some(e) = short(stream.received()) {
                    return Err(e);
                }
                let model = stream.finish().map_err(|e| fetch_error(e.to_string()))?;
                Ok((Finished::Gpu(model, ctx), then))
            }
            Stage::Cpu {
                bytes,
                header,
                then,
            } => {
                if let Some(e) = short(bytes.len() as u64) {
                    return Err(e);
                }
                Ok((Finished::Cpu(GgufFile::from_parsed(header, bytes)?), then))
            }
        }
    }
}

/// Appends `chunk`, which must start at `offset`, the end of `bytes`.
fn append(bytes: &mut Vec<u8>, offset: u64, chunk: &[u8]) -> Result<(), WebError> {
    if offset != bytes.len() as u64 {
        return Err(fetch_error(format!(
            "model bytes at {offset}, where the next expected are at {}",
            bytes.len()
        )));
    }
    bytes.try_reserve(chunk.len()).map_err(|_| {
        WebError::new(
            Code::OutOfMemory,
            format!(
                "a model of more than {} bytes does not fit in this page's WebAssembly memory",
                bytes.len() + chunk.len()
            ),
        )
    })?;
    bytes.extend_from_slice(chunk);
    Ok(())
}

/// Once the header is read: the engine chosen and, on WebGPU, the model built (its buffers and
/// pipelines made, the weights in `prefix` written); for the CPU engine, room for the file.
async fn start(
    header: Gguf,
    mut prefix: Vec<u8>,
    purpose: Purpose,
    size: Option<u64>,
) -> Result<Stage, WebError> {
    // On WebGPU only the bytes past the header are still needed: the header's go before the
    // tokenizer is built, which lowers the page's peak memory by the header's size.
    let data_start = usize::try_from(header.data_offset)
        .unwrap_or(usize::MAX)
        .min(prefix.len());
    let weights_only = |prefix: Vec<u8>| (data_start, prefix[data_start..].to_vec());
    let mut from = 0;
    let (ctx, context, then) = match purpose {
        Purpose::Target(options) => {
            let choice = backend::choose(options.backend).await;
            match choice {
                Choice::Webgpu => (from, prefix) = weights_only(prefix),
                // Before the tokenizer: the file's block goes first, as one allocation.
                Choice::Cpu { .. } => reserve_file(&mut prefix, size)?,
            }
            let session = Session::new(&header)?;
            match choice {
                Choice::Webgpu => {
                    let ctx = device::open().await?;
                    let context = options.context;
                    let then = Then::Target {
                        options,
                        session,
                        reason: None,
                    };
                    (Some(ctx), context, then)
                }
                Choice::Cpu { reason } => {
                    let then = Then::Target {
                        options,
                        session,
                        reason,
                    };
                    (None, None, then)
                }
            }
        }
        Purpose::Draft(engine) => {
            let (ctx, context) = {
                let slot = engine.slot.borrow();
                let loaded = slot.as_ref().ok_or_else(busy_error)?;
                match &loaded.model {
                    Model::Gpu { ctx, model } => (Some(ctx.clone()), Some(model.capacity())),
                    Model::Cpu(_) => (None, None),
                }
            };
            match ctx {
                Some(_) => (from, prefix) = weights_only(prefix),
                None => reserve_file(&mut prefix, size)?,
            }
            // Before any weight is read: a draft of another vocabulary costs no download.
            let info = draft::check(&engine.session.tokenizer, &header)?;
            (ctx, context, Then::Draft { engine, info })
        }
    };
    match ctx {
        Some(ctx) => {
            let mut stream = GpuModel::stream(&ctx, header, context)?;
            if stream.write(from as u64, &prefix)? {
                ctx.settle().await?;
            }
            Ok(Stage::Gpu { stream, ctx, then })
        }
        None => Ok(Stage::Cpu {
            bytes: prefix,
            header,
            then,
        }),
    }
}

/// Room for the whole file in `prefix` (its first bytes), for the CPU engine, which reads its
/// weights from WebAssembly memory: `out_of_memory` before any weight is read when the page
/// cannot hold it.
fn reserve_file(prefix: &mut Vec<u8>, size: Option<u64>) -> Result<(), WebError> {
    let Some(size) = size else {
        return Ok(());
    };
    let more = size.saturating_sub(prefix.len() as u64);
    let fits = usize::try_from(more)
        .ok()
        .is_some_and(|more| prefix.try_reserve_exact(more).is_ok());
    if !fits {
        return Err(WebError::new(
            Code::OutOfMemory,
            format!(
                "a model of {size} bytes does not fit in this page's WebAssembly memory, where \
                 the CPU engine reads its weights"
            ),
        ));
    }
    Ok(())
}
