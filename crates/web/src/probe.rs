//! What a GGUF file is and what loading it takes, from its first bytes: the npm package's
//! `Runahead.probe` reads a growing prefix of the file (HTTP Range requests, a Blob slice, the
//! cached entry's first bytes) and calls [`probe_header`] until it answers. Every check is the
//! loaders' own: the header is parsed by the GGUF reader ([`Gguf::parse_prefix`]), the
//! architecture and hyper-parameters by the architecture's plan as the page's engines run it
//! ([`page_config`]), every tensor the model reads by [`page_tensors`], the tokenizer and chat
//! template by their constructors.
//! The sizes are the engines' layouts: weights as the GPU engine's memory plan counts them
//! (matrices as stored, vectors as f32), the KV cache in f16 (keys and values of every layer for
//! the cache's tokens, on the GPU engine and the CPU engine alike).

use std::collections::BTreeMap;

use runahead_gguf::{Gguf, GgufError, DEFAULT_HEADER_BUDGET};
use runahead_model::{model_template, ChatTemplate, ModelConfig, ModelError, Plan, Tokenizer};
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::backend::{self, BackendOption, Choice};
use crate::error::{Code, WebError};
use crate::session::{page_config, page_tensors};

/// Bytes of one KV cache entry element (f16), as both engines keep the cache.
const KV_ELEMENT_BYTES: u64 = 2;

/// One check: whether it passed, and why not.
#[derive(Serialize)]
struct Check {
    supported: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

impl Check {
    fn of<T>(result: &Result<T, ModelError>) -> Check {
        Check {
            supported: result.is_ok(),
            reason: result.as_ref().err().map(ToString::to_string),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Checks {
    /// The architecture and hyper-parameters (the engines' config).
    architecture: Check,
    /// Every tensor the model reads, with its shape and a type the engines decode.
    tensors: Check,
    tokenizer: Check,
    /// The chat template, when the file has one (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    chat_template: Option<Check>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Largest {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    shape: Vec<u64>,
    bytes: u64,
    /// Bytes of one row (`shape[0]` elements): the GPU engine splits a matrix by rows across
    /// bindings, so one row is what must fit in one.
    row_bytes: u64,
}

/// The model's shape, when its config reads.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Shape {
    layers: usize,
    embedding: usize,
    feed_forward: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab: usize,
    trained_context: usize,
    /// KV cache size in tokens at the requested context (default 4096, capped by the trained
    /// context), as either engine sizes it.
    context: usize,
    /// Keys and values of every layer for `context` tokens, f16 (a sliding-window layer its
    /// ring where that is smaller).
    kv_cache_bytes: u64,
    /// One layer's keys (or values): one storage binding on the GPU engine.
    kv_cache_layer_bytes: u64,
    /// The GPU engine's logits buffer (`MAX_ROWS` rows of the vocabulary, f32): one binding.
    logits_bytes: u64,
}

/// `probeHeader`'s answer once the header is whole.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Probe {
    complete: bool,
    /// Where the tensor data starts: the header's bytes, padded to the alignment.
    header_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_size: Option<u64>,
    /// Where the last tensor's bytes end: the file's size at least (for a server that does not
    /// say the size).
    data_end: u64,
    /// Memory the parsed header takes (metadata, tokenizer arrays, tensor table).
    header_memory: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    architecture: Option<String>,
    /// Whether the engines run this model (every check passed), and the first reason not.
    supported: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    checks: Checks,
    /// Every tensor's elements.
    parameters: u64,
    tensor_count: usize,
    /// Tensor count per GGML type.
    tensor_types: BTreeMap<String, usize>,
    /// Bytes of every tensor in the file.
    tensor_bytes: u64,
    /// Weights as the GPU engine holds them (the tensors the model reads as stored, their
    /// vectors as f32); absent when the tensors check failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    weights_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    largest_tensor: Option<Largest>,
    /// The longest row of any tensor, in bytes: what must fit one binding on the GPU engine.
    max_row_bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    shape: Option<Shape>,
}

/// `probeHeader` before the header is whole: read at least `needBytes` from the file's start.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NeedMore {
    complete: bool,
    pub(crate) need_bytes: u64,
}

/// Describes a GGUF file from its first bytes. `prefix`: the file's first bytes; `file_size`:
/// the whole file's size (`undefined` when unknown: the tensors are then not checked against
/// it; a caller at the end of the file passes the prefix's length); `context`: the KV cache
/// size to count (default 4096, capped by the model's trained context). Returns `{complete:
/// false, needBytes}` while the prefix ends inside the header, else the description
/// (`complete: true`; see the npm package's `Runahead.probe`). A file that is not GGUF, or
/// whose header is damaged or larger than the parser's budget, is the error `gguf`; a GGUF the
/// engines cannot run is described with `supported: false` and the reason.
#[wasm_bindgen(js_name = probeHeader)]
pub fn probe_header(
    prefix: &[u8],
    file_size: Option<f64>,
    context: Option<f64>,
) -> Result<JsValue, JsValue> {
    Ok(probe(prefix, file_size, context)?)
}

/// `{backend: 'webgpu' | 'cpu', reason?}`: where `load(..., {backend: 'auto'})` would go in
/// this thread, by the loader's own rule.
#[wasm_bindgen(js_name = probeBackend)]
pub async fn probe_backend() -> Result<JsValue, JsValue> {
    #[derive(Serialize)]
    struct Backend {
        backend: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }
    let out = match backend::choose(BackendOption::Auto).await {
        Choice::Webgpu => Backend {
            backend: "webgpu",
            reason: None,
        },
        Choice::Cpu { reason } => Backend {
            backend: "cpu",
            reason,
        },
    };
    Ok(crate::to_js(&out)?)
}

fn count(what: &str, value: Option<f64>) -> Result<Option<u64>, WebError> {
    match value {
        None => Ok(None),
        Some(v) if v >= 0.0 && v.fract() == 0.0 && v <= u64::MAX as f64 => Ok(Some(v as u64)),
        Some(v) => Err(WebError::new(
            Code::InvalidOption,
            format!("{what} must be a whole number of at least 0 (got {v})"),
        )),
    }
}

fn probe(prefix: &[u8], file_size: Option<f64>, context: Option<f64>) -> Result<JsValue, WebError> {
    let file_size = count("the file's size", file_size)?;
    let context = count("context", context)?;
    if context == Some(0) {
        return Err(WebError::new(
            Code::InvalidOption,
            "context must be at least 1",
        ));
    }
    let have = prefix.len() as u64;
    let header = match Gguf::parse_prefix(prefix, file_size.unwrap_or(u64::MAX)) {
        Ok(header) => header,
        Err(e) => return need_more(e, have, file_size).and_then(|more| crate::to_js(&more)),
    };
    let context = context.and_then(|c| usize::try_from(c).ok());
    crate::to_js(&describe(&header, file_size, context))
}

/// The bytes to read next when the prefix ended inside the header; any other error is the
/// file's.
pub(crate) fn need_more(
    e: GgufError,
    have: u64,
    file_size: Option<u64>,
) -> Result<NeedMore, WebError> {
    let Some(needed) = e.bytes_needed() else {
        return Err(e.into());
    };
    let need_bytes = needed.max(have.saturating_add(1));
    if file_size.is_some_and(|size| need_bytes > size) {
        return Err(e.into());
    }
    // The parsed header takes at least as much memory as its bytes in the file: a header past
    // the parser's budget would be refused once read, so it is refused before.
    if need_bytes > DEFAULT_HEADER_BUDGET {
        return Err(WebError::new(
            Code::Gguf,
            format!(
                "not a valid GGUF file: its header claims more than {DEFAULT_HEADER_BUDGET} bytes \
                 ({need_bytes} at least)"
            ),
        ));
    }
    Ok(NeedMore {
        complete: false,
        need_bytes,
    })
}

fn describe(header: &Gguf, file_size: Option<u64>, context: Option<usize>) -> Probe {
    let meta = &header.metadata;
    let config = page_config(header);
    let tensors = match &config {
        Ok(config) => page_tensors(header, config),
        Err(_) => Err(ModelError::Config(
            "not checked: the architecture is not supported".into(),
        )),
    };
    let tokenizer = Tokenizer::from_metadata(meta);
    // The file's template (a key that is not a string is its error), or a built-in one.
    let source = match meta.get("tokenizer.chat_template") {
        Some(_) => Some(meta.str("tokenizer.chat_template")),
        None => model_template(meta).map(|t| Ok(t.source)),
    };
    let chat_template = source.map(|source| {
        let source = source?;
        let (bos, eos) = match &tokenizer {
            Ok(t) => {
                let special = |id: Option<u32>| id.map(|i| t.token_text(i)).unwrap_or_default();
                (special(t.bos), special(t.eos))
            }
            Err(_) => Default::default(),
        };
        ChatTemplate::new(source, &bos, &eos).map(|_| ())
    });
    let checks = Checks {
        architecture: Check::of(&config),
        tensors: Check::of(&tensors),
        tokenizer: Check::of(&tokenizer),
        chat_template: chat_template.as_ref().map(Check::of),
    };
    let reason = [&checks.architecture, &checks.tensors, &checks.tokenizer]
        .into_iter()
        .chain(checks.chat_template.as_ref())
        .find_map(|c| c.reason.clone());
    let mut tensor_types = BTreeMap::new();
    for t in &header.tensors {
        *tensor_types.entry(t.ty.to_string()).or_default() += 1;
    }
    let row_bytes = |t: &runahead_gguf::TensorInfo| {
        t.ty.bytes_for(t.shape.first().copied().unwrap_or(1))
            .unwrap_or(t.size)
    };
    let largest = header
        .tensors
        .iter()
        .max_by_key(|t| t.size)
        .map(|t| Largest {
            name: t.name.clone(),
            ty: t.ty.to_string(),
            shape: t.shape.clone(),
            bytes: t.size,
            row_bytes: row_bytes(t),
        });
    let weights_bytes = tensors.as_ref().ok().map(|totals| {
        totals
            .file_bytes
            .saturating_add(totals.vector_elements.saturating_mul(4))
    });
    Probe {
        complete: true,
        header_bytes: header.data_offset,
        file_size,
        data_end: header.tensors.iter().fold(header.data_offset, |end, t| {
            end.max(
                header
                    .data_offset
                    .saturating_add(t.offset)
                    .saturating_add(t.size),
            )
        }),
        header_memory: header.memory,
        name: meta.str("general.name").ok().map(str::to_owned),
        architecture: meta.str("general.architecture").ok().map(str::to_owned),
        supported: reason.is_none(),
        reason,
        checks,
        parameters: header
            .tensors
            .iter()
            .fold(0u64, |n, t| n.saturating_add(t.n_elements())),
        tensor_count: header.tensors.len(),
        tensor_types,
        tensor_bytes: header
            .tensors
            .iter()
            .fold(0u64, |n, t| n.saturating_add(t.size)),
        weights_bytes,
        largest_tensor: largest,
        max_row_bytes: header.tensors.iter().map(row_bytes).max().unwrap_or(0),
        shape: config
            .ok()
            .map(|c| shape(&c, Plan::from_header(header).ok(), context)),
    }
}

/// `plan` counts the rings of sliding-window layers (see `runahead_model::kv_ring`).
fn shape(c: &ModelConfig, plan: Option<Plan>, context: Option<usize>) -> Shape {
    // The GPU engine's default and the CPU engine's in the page are the same 4096 tokens, each
    // capped by the trained context.
    let context = context
        .unwrap_or(crate::CPU_DEFAULT_CONTEXT)
        .min(c.context_length);
    // The config checked every product of these in u64; saturating keeps that true here.
    let layer = (context as u64)
        .saturating_mul(c.kv_dim() as u64)
        .saturating_mul(KV_ELEMENT_BYTES);
    Shape {
        layers: c.n_layers,
        embedding: c.n_embd,
        feed_forward: c.n_ff,
        heads: c.n_heads,
        kv_heads: c.n_kv_heads,
        head_dim: c.head_dim,
        vocab: c.vocab_size,
        trained_context: c.context_length,
        context,
        kv_cache_bytes: plan.map_or(
            layer.saturating_mul(2).saturating_mul(c.n_layers as u64),
            |p| p.kv_cache_bytes(context),
        ),
        kv_cache_layer_bytes: layer,
        logits_bytes: (runahead_gpu::MAX_ROWS as u64)
            .saturating_mul(c.vocab_size as u64)
            .saturating_mul(4),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runahead_gguf::GgufWriter;

    #[test]
    fn a_prefix_inside_the_header_asks_for_more_and_the_rest_is_the_files_error() {
        let mut w = GgufWriter::new();
        w.meta_str("general.architecture", "mamba");
        w.tensor_f32("token_embd.weight", &[4, 2], &[1.0; 8]);
        let bytes = w.to_bytes();
        let size = bytes.len() as u64;
        let more = |cut: usize| match Gguf::parse_prefix(&bytes[..cut], size) {
            Ok(_) => None,
            Err(e) => Some(need_more(e, cut as u64, Some(size))),
        };
        let first = more(8).unwrap().unwrap();
        assert!(first.need_bytes > 8);
        // Growing the prefix to what each answer asks for reaches the whole header.
        let mut cut = 8usize;
        while let Some(next) = more(cut) {
            cut = next.unwrap().need_bytes as usize;
        }
        let header = Gguf::parse_prefix(&bytes[..cut], size).unwrap();
        let probe = describe(&header, Some(size), None);
        assert!(!probe.supported);
        assert!(probe.reason.unwrap().contains("mamba"));
        assert!(!probe.checks.architecture.supported);
        assert_eq!(probe.parameters, 8);
        // Not a GGUF at all: the file's error, not a request for more.
        let bad = Gguf::parse_prefix(b"GGUX\x03\0\0\0", 1 << 20).unwrap_err();
        assert_eq!(
            need_more(bad, 8, Some(1 << 20)).unwrap_err().code,
            Code::Gguf
        );
    }
}
