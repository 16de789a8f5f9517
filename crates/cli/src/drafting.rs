//! `--draft` and `--depth`: building drafters (including a draft model on the target's
//! backend) and the depth policy.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use runahead_gguf::GgufFile;
use runahead_gpu::{GpuContext, GpuModel};
use runahead_model::{CpuModel, LanguageModel, Tokenizer};
use runahead_speculate::{
    calibrate, AutoDrafter, Depth, Drafter, ModelDrafter, NgramDrafter, SuffixDrafter,
};

/// What `--draft` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DraftSpec {
    None,
    Ngram,
    Suffix,
    Model(PathBuf),
    /// Suffix lookup, plus a draft model when one is given.
    Auto(Option<PathBuf>),
}

impl DraftSpec {
    /// Parses `none | ngram | suffix | model:PATH | auto | auto:PATH`.
    pub fn parse(s: &str) -> Result<Self> {
        Ok(match s {
            "none" => DraftSpec::None,
            "ngram" => DraftSpec::Ngram,
            "suffix" => DraftSpec::Suffix,
            "auto" => DraftSpec::Auto(None),
            _ => {
                if let Some(path) = s.strip_prefix("model:").filter(|p| !p.is_empty()) {
                    DraftSpec::Model(path.into())
                } else if let Some(path) = s.strip_prefix("auto:").filter(|p| !p.is_empty()) {
                    DraftSpec::Auto(Some(path.into()))
                } else {
                    bail!(
                        "--draft {s}: expected none, ngram, suffix, model:PATH, auto or auto:PATH"
                    )
                }
            }
        })
    }

    fn model_path(&self) -> Option<&Path> {
        match self {
            DraftSpec::Model(p) | DraftSpec::Auto(Some(p)) => Some(p),
            _ => None,
        }
    }
}

/// Where a draft model runs: the target's backend.
pub enum DraftBackend<'a> {
    /// The CPU engine with this many threads (default: every core).
    Cpu {
        threads: Option<usize>,
    },
    Reference,
    Gpu(&'a GpuContext),
}

/// Builds the drafter `spec` names. A draft model is loaded on `backend` with the target's
/// context size, after checking that its tokenizer matches the target's.
pub fn build_drafter(
    spec: &DraftSpec,
    target_tokenizer: &Tokenizer,
    backend: DraftBackend<'_>,
    context: usize,
) -> Result<Option<Box<dyn Drafter>>> {
    let model = match spec.model_path() {
        Some(path) => Some(load_draft_model(path, target_tokenizer, backend, context)?),
        None => None,
    };
    Ok(match spec {
        DraftSpec::None => None,
        DraftSpec::Ngram => Some(Box::new(NgramDrafter::default())),
        DraftSpec::Suffix => Some(Box::new(SuffixDrafter::default())),
        DraftSpec::Model(_) => model,
        DraftSpec::Auto(_) => Some(Box::new(AutoDrafter::new(SuffixDrafter::default(), model))),
    })
}

fn load_draft_model(
    path: &Path,
    target_tokenizer: &Tokenizer,
    backend: DraftBackend<'_>,
    context: usize,
) -> Result<Box<dyn Drafter>> {
    let file = GgufFile::open(path)
        .with_context(|| format!("cannot load draft model {}", path.display()))?;
    let tok = Tokenizer::from_metadata(&file.header.metadata)
        .context("cannot build the draft model's tokenizer")?;
    target_tokenizer
        .check_draft_compatible(&tok)
        .with_context(|| format!("draft model {}", path.display()))?;
    Ok(match backend {
        DraftBackend::Cpu { threads } => {
            let file = std::sync::Arc::new(file);
            let m = crate::load_cpu(&file, Some(context), threads)
                .context("cannot load the draft model")?;
            check_vocab(&m, target_tokenizer)?;
            Box::new(ModelDrafter::new(m))
        }
        DraftBackend::Reference => {
            let m = CpuModel::load(&file, Some(context)).context("cannot load the draft model")?;
            check_vocab(&m, target_tokenizer)?;
            Box::new(ModelDrafter::new(m))
        }
        DraftBackend::Gpu(ctx) => {
            let m = GpuModel::load(ctx, &file, Some(context))
                .context("cannot load the draft model onto the GPU")?;
            check_vocab(&m, target_tokenizer)?;
            Box::new(ModelDrafter::new(m))
        }
    })
}

fn check_vocab<M: LanguageModel>(m: &M, tok: &Tokenizer) -> Result<()> {
    let rows = m.config().vocab_size;
    if rows < tok.vocab_size() {
        bail!(
            "the draft model's output has {rows} rows, fewer than the {} tokens of the vocabulary",
            tok.vocab_size()
        );
    }
    Ok(())
}

/// `--depth auto` calibrates the target's verification cost now (a few forwards on an empty
/// cache); `--depth N` verifies up to N nodes every step.
pub fn depth<M: LanguageModel>(arg: &str, model: &mut M, speculating: bool) -> Result<Depth> {
    if arg == "auto" {
        if !speculating {
            return Ok(Depth::default());
        }
        let cost = pollster::block_on(calibrate(model, 3)).context("calibrating the target")?;
        return Ok(Depth::adaptive(cost));
    }
    match arg.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(Depth::Fixed(n)),
        _ => bail!("--depth {arg}: expected auto or a number of draft tokens >= 1"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_draft_specs() {
        assert_eq!(DraftSpec::parse("none").unwrap(), DraftSpec::None);
        assert_eq!(DraftSpec::parse("suffix").unwrap(), DraftSpec::Suffix);
        assert_eq!(
            DraftSpec::parse("model:a/b.gguf").unwrap(),
            DraftSpec::Model("a/b.gguf".into())
        );
        assert_eq!(
            DraftSpec::parse("auto:x.gguf").unwrap(),
            DraftSpec::Auto(Some("x.gguf".into()))
        );
        assert!(DraftSpec::parse("model:").is_err());
        assert!(DraftSpec::parse("medusa").is_err());
    }
}
