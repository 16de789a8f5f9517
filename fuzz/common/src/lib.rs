//! What the fuzz targets run, and the input formats they share with the seed generator
//! (`src/bin/seeds.rs`). Each `check_*` function is one target's body: it drives the code that
//! reads untrusted input the way the CLI and the page do, and panics only on a broken promise
//! (a panic inside the crates is the finding libFuzzer reports).

use std::path::PathBuf;

use runahead_gguf::GgufFile;
use runahead_model::{
    check_tensors, ChatMessage, ChatTemplate, ModelConfig, Tokenizer, TEMPLATE_OUTPUT_SLACK,
};

/// The real model whose tokenizer the `tokenizer` target fuzzes.
pub const SMOLLM2: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// The other real model (its header and chat template seed the corpora).
pub const QWEN: &str = "Qwen2.5-Coder-0.5B-Instruct.gguf";

/// Tensors of at most this many elements are decoded by `check_gguf` (bigger ones only cost
/// time: the block decoders work a block at a time).
const MAX_DECODE_ELEMENTS: u64 = 1 << 14;

/// Makes libFuzzer's crash handler run on a stack of its own, so a stack overflow is reported
/// with its input like any crash. Without a sanitizer, the handler would run on the exhausted
/// stack and the process die of SIGSEGV with nothing written. libFuzzer keeps `SA_ONSTACK`
/// from a default SIGSEGV disposition it replaces, so call this from a target's `init`, which
/// runs before libFuzzer installs its handlers.
pub fn report_stack_overflows() {
    const ALT_STACK: usize = 1 << 20;
    let stack = Box::leak(vec![0u8; ALT_STACK].into_boxed_slice());
    let alt = libc::stack_t {
        ss_sp: stack.as_mut_ptr().cast(),
        ss_flags: 0,
        ss_size: ALT_STACK,
    };
    // SAFETY: the alternate stack lives for the rest of the process (leaked), and the
    // disposition installed is the default one, only flagged to run on that stack.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        action.sa_flags = libc::SA_ONSTACK;
        let ok = libc::sigaltstack(&alt, std::ptr::null_mut()) == 0
            && libc::sigaction(libc::SIGSEGV, &action, std::ptr::null_mut()) == 0;
        assert!(ok, "cannot set up an alternate signal stack");
    }
}

/// The model directory: `RUNAHEAD_MODELS` as for the tests, else the repository's `models/`.
pub fn models_dir() -> PathBuf {
    std::env::var_os("RUNAHEAD_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models"))
}

/// Opens a real model from [`models_dir`], or panics with the command that fetches it.
pub fn open_model(file: &str) -> GgufFile {
    let path = models_dir().join(file);
    GgufFile::open(&path).unwrap_or_else(|e| {
        panic!("{e}\nthe fuzz target needs {file}: run scripts/fetch-models.sh smollm2")
    })
}

/// `gguf_load`: a file of arbitrary bytes through everything a loader does before it reads
/// the weights: parse, config, tensor checks, decoding of small tensors, tokenizer, a short
/// encode/decode, and the chat template compiled and rendered for one message.
pub fn check_gguf(data: &[u8]) {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    if let Ok(config) = ModelConfig::from_file(&file) {
        let _ = check_tensors(&file, &config);
    }
    for info in &file.header.tensors {
        if info.ty.is_supported() && info.n_elements() <= MAX_DECODE_ELEMENTS {
            let _ = file.tensor_f32(&info.name);
        }
    }
    let meta = &file.header.metadata;
    let Ok(tok) = Tokenizer::from_metadata(meta) else {
        return;
    };
    if let Ok(ids) = tok.encode("Hi <|im_start|>user\n12 345 ünï 😀\t  x") {
        let _ = tok.decode(&ids);
    }
    // Ids past the vocabulary (a draft model's, a corrupt file's) decode to nothing.
    let vocab = tok.vocab_size() as u32;
    let _ = tok.decode(&[0, 1, vocab, vocab.wrapping_add(1), u32::MAX]);
    let mut decoder = tok.decoder();
    for id in 0..vocab.min(64) {
        let _ = decoder.push(id);
    }
    let _ = decoder.finish();
    if let Ok(source) = meta.str("tokenizer.chat_template") {
        if let Ok(template) = ChatTemplate::for_tokenizer(source, &tok) {
            let _ = template.render(&[ChatMessage::new("user", "Hi")], true);
        }
    }
}

/// A tokenizer with what the `tokenizer` target needs to know of it.
pub struct FuzzTokenizer {
    pub tokenizer: Tokenizer,
    /// Which bytes have a token of their own. A byte-level vocabulary may lack some: SmolLM2's
    /// has no token for 0x04, 0x06, 0x13, 0x14, 0x16, 0x1d, 0xf1 and 0xf2 (nor for 0xc0, 0xc1,
    /// 0xf5..=0xff, which UTF-8 never uses), and BPE then drops those bytes, as llama.cpp and
    /// Hugging Face's tokenizer do.
    pub byte_has_token: [bool; 256],
}

impl FuzzTokenizer {
    pub fn new(tokenizer: Tokenizer) -> Self {
        let mut byte_has_token = [false; 256];
        for id in 0..tokenizer.vocab_size() as u32 {
            if let [b] = tokenizer.token_bytes(id) {
                byte_has_token[*b as usize] = true;
            }
        }
        FuzzTokenizer {
            tokenizer,
            byte_has_token,
        }
    }
}

/// `tokenizer`: the input as text (when it is UTF-8) and as token ids, through a real
/// byte-level BPE tokenizer. Promises checked: any text encodes, to ids inside the
/// vocabulary, and decodes back to itself less the bytes the vocabulary has no token for
/// (control tokens decode to their text); any ids decode without panicking, and decoding
/// them one at a time with the streaming decoder gives the same text as decoding them at once.
pub fn check_tokenizer(t: &FuzzTokenizer, data: &[u8]) {
    let tok = &t.tokenizer;
    if let Ok(text) = std::str::from_utf8(data) {
        let ids = tok.encode(text).expect("byte-level BPE encodes any text");
        let vocab = tok.vocab_size();
        assert!(
            ids.iter().all(|&id| (id as usize) < vocab),
            "{text:?} encoded to ids outside the vocabulary: {ids:?}"
        );
        let body = match (tok.add_bos, tok.bos) {
            (true, Some(_)) => &ids[1..],
            _ => &ids[..],
        };
        let kept: Vec<u8> = data
            .iter()
            .copied()
            .filter(|&b| t.byte_has_token[b as usize])
            .collect();
        assert_eq!(
            tok.decode(body),
            String::from_utf8_lossy(&kept),
            "round trip of {text:?} via {ids:?}"
        );
    }
    // Two bytes per id: three in four land inside SmolLM2's 49,152 tokens, the rest past it.
    let mut ids: Vec<u32> = data
        .chunks(2)
        .map(|c| u32::from(c[0]) | u32::from(c.get(1).copied().unwrap_or(0)) << 8)
        .collect();
    ids.push(u32::MAX);
    let at_once = tok.decode(&ids);
    let mut decoder = tok.decoder();
    let mut streamed = String::new();
    for &id in &ids {
        streamed.push_str(&decoder.push(id));
        let _ = tok.token_text(id);
    }
    streamed.push_str(&decoder.finish());
    assert_eq!(streamed, at_once, "streaming decode of {ids:?}");
}

/// A chat template render request, as the `chat_template` target reads it from bytes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChatInput {
    pub source: String,
    pub bos: String,
    pub eos: String,
    pub messages: Vec<ChatMessage>,
    pub add_generation_prompt: bool,
}

impl ChatInput {
    /// Byte 0: flags (bit 0: add_generation_prompt). The rest, as lossy UTF-8, split at NUL:
    /// template source, bos, eos, then role and content of each message.
    pub fn from_bytes(data: &[u8]) -> Self {
        let Some((&flags, rest)) = data.split_first() else {
            return ChatInput::default();
        };
        let text = String::from_utf8_lossy(rest);
        let mut parts = text.split('\0');
        let mut next = || parts.next().unwrap_or("").to_owned();
        let (source, bos, eos) = (next(), next(), next());
        let mut messages = Vec::new();
        loop {
            let role = next();
            let content = next();
            if role.is_empty() && content.is_empty() {
                break;
            }
            messages.push(ChatMessage::new(&role, &content));
        }
        ChatInput {
            source,
            bos,
            eos,
            messages,
            add_generation_prompt: flags & 1 != 0,
        }
    }

    /// The inverse of [`ChatInput::from_bytes`] for strings without NUL (seeds).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut parts = vec![self.source.as_str(), &self.bos, &self.eos];
        for m in &self.messages {
            parts.extend([m.role.as_str(), m.content.as_str()]);
        }
        let mut out = vec![u8::from(self.add_generation_prompt)];
        out.extend_from_slice(parts.join("\0").as_bytes());
        out
    }
}

/// `chat_template`: compile an arbitrary template and render arbitrary messages with it. A
/// render either fails with an error or stays within the output cap.
pub fn check_chat(data: &[u8]) {
    let input = ChatInput::from_bytes(data);
    let Ok(template) = ChatTemplate::new(&input.source, &input.bos, &input.eos) else {
        return;
    };
    if let Ok(text) = template.render(&input.messages, input.add_generation_prompt) {
        let own: usize = input
            .messages
            .iter()
            .map(|m| m.role.len() + m.content.len())
            .sum();
        assert!(
            text.len() <= own + TEMPLATE_OUTPUT_SLACK,
            "rendered {} bytes past the cap",
            text.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_input_round_trips() {
        let input = ChatInput {
            source: "{{ messages[0].content }}".into(),
            bos: "<s>".into(),
            eos: "</s>".into(),
            messages: vec![ChatMessage::new("user", "hi"), ChatMessage::new("x", "")],
            add_generation_prompt: true,
        };
        assert_eq!(ChatInput::from_bytes(&input.to_bytes()), input);
    }
}
