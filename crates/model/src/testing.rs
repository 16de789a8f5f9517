//! Small generated models for tests: real GGUF files with seeded random weights in every
//! block format the engines support, and a tiny byte-level BPE vocabulary, so engines can be
//! compared quickly without a downloaded model (natively and in the browser).

use runahead_gguf::{GgmlType, GgufWriter, Value, ValueType};

use crate::Architecture;

/// The process's resident set in KiB (`VmRSS` of /proc/self/status; Linux), for tests that
/// check memory does not grow.
pub fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// splitmix64: a tiny seeded generator for test data (not for sampling).
pub struct TestRng(u64);

impl TestRng {
    pub fn new(seed: u64) -> Self {
        TestRng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub fn symmetric(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn floats(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.symmetric() * scale).collect()
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Random blocks of `ty` encoding `n` elements, with every scale field set to a value of
/// about `scale` so the decoded weights stay in a sane range.
pub fn random_blocks(ty: GgmlType, n: usize, scale: f32, rng: &mut TestRng) -> Vec<u8> {
    let bytes = ty.bytes_for(n as u64).expect("whole blocks") as usize;
    let f16 = |v: f32| half::f16::from_f32(v).to_le_bytes();
    match ty {
        GgmlType::F32 => rng
            .floats(n, scale)
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect(),
        GgmlType::F16 => rng.floats(n, scale).iter().flat_map(|&v| f16(v)).collect(),
        GgmlType::BF16 => rng
            .floats(n, scale)
            .iter()
            .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
            .collect(),
        _ => {
            let mut out = rng.bytes(bytes);
            let bb = ty.block_bytes() as usize;
            // (offset, magnitude) of each f16 scale field in a block.
            let fields: &[(usize, f32)] = match ty {
                GgmlType::Q4_0 | GgmlType::Q5_0 => &[(0, 1.0 / 8.0)],
                GgmlType::Q8_0 => &[(0, 1.0 / 64.0)],
                GgmlType::Q4_1 | GgmlType::Q5_1 => &[(0, 1.0 / 8.0), (2, 1.0)],
                GgmlType::Q4_K | GgmlType::Q5_K => &[(0, 1.0 / 256.0), (2, 1.0 / 64.0)],
                GgmlType::Q6_K => &[(208, 1.0 / 1024.0)],
                _ => panic!("random_blocks: {ty} is not a supported type"),
            };
            for block in out.chunks_exact_mut(bb) {
                for &(at, mag) in fields {
                    let v = scale * mag * (0.5 + 0.5 * rng.symmetric().abs());
                    let v = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) && at == 2 {
                        -v * 4.0
                    } else {
                        v
                    };
                    block[at..at + 2].copy_from_slice(&f16(v));
                }
            }
            out
        }
    }
}

/// Shape of a generated model.
#[derive(Clone, Debug)]
pub struct TinyModel {
    pub arch: Architecture,
    pub n_layers: usize,
    pub n_embd: usize,
    pub n_ff: usize,
    pub n_heads: usize,
    pub n_kv_heads: usize,
    pub context: usize,
    /// Tied output when false.
    pub separate_output: bool,
    pub seed: u64,
    /// Block formats the matrices take in turn, in file order (per layer q, k, v, output,
    /// gate, up, down; then the output matrix when separate).
    pub formats: &'static [GgmlType],
}

/// Every supported block format but F32/BF16, so every format is exercised by every forward.
pub const ROTATING_FORMATS: &[GgmlType] = &[
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::F16,
];

impl TinyModel {
    /// A llama-style model: 2 layers, width 256 (multiples of 256 so K-quants fit), GQA 4/2.
    pub fn llama() -> Self {
        TinyModel {
            arch: Architecture::Llama,
            n_layers: 2,
            n_embd: 256,
            n_ff: 512,
            n_heads: 4,
            n_kv_heads: 2,
            context: 256,
            separate_output: false,
            seed: 1,
            formats: ROTATING_FORMATS,
        }
    }

    /// A qwen2-style model: biases, NEOX RoPE, separate output.
    pub fn qwen2() -> Self {
        TinyModel {
            arch: Architecture::Qwen2,
            separate_output: true,
            seed: 2,
            ..Self::llama()
        }
    }

    /// [`TinyModel::to_gguf`] with every value of the f32 tensor `name` set to NaN: a corrupt
    /// file whose every logit comes out NaN when `name` is on every path (`output_norm.weight`).
    pub fn to_gguf_with_nan(&self, name: &str) -> Vec<u8> {
        let mut bytes = self.to_gguf();
        let header = runahead_gguf::Gguf::parse(&bytes).expect("a generated model parses");
        let info = header.tensor(name).expect("the tensor exists");
        assert_eq!(info.ty, GgmlType::F32, "{name} is not f32");
        let start = (header.data_offset + info.offset) as usize;
        for v in bytes[start..start + info.size as usize].chunks_exact_mut(4) {
            v.copy_from_slice(&f32::NAN.to_le_bytes());
        }
        bytes
    }

    /// The GGUF bytes. Matrices rotate through [`TinyModel::formats`].
    pub fn to_gguf(&self) -> Vec<u8> {
        self.writer().to_bytes()
    }

    /// [`TinyModel::to_gguf`] with metadata values replaced or added: a doctored file, for
    /// tests of what the loaders refuse.
    pub fn to_gguf_with_meta(&self, meta: &[(&str, Value)]) -> Vec<u8> {
        let mut w = self.writer();
        for (key, value) in meta {
            w.set_meta(key, value.clone());
        }
        w.to_bytes()
    }

    /// The architecture's metadata key prefix (`llama`, `qwen2`).
    pub fn arch_name(&self) -> &'static str {
        match self.arch {
            Architecture::Llama => "llama",
            Architecture::Qwen2 => "qwen2",
        }
    }

    fn writer(&self) -> GgufWriter {
        let mut rng = TestRng::new(self.seed);
        let (vocab_tokens, merges, types) = tiny_vocab();
        let vocab = vocab_tokens.len();
        let arch = self.arch_name();
        let head_dim = self.n_embd / self.n_heads;
        let kv = self.n_kv_heads * head_dim;
        let mut w = GgufWriter::new();
        w.meta_str("general.architecture", arch)
            .meta_str("general.name", &format!("tiny-{arch}"))
            .meta_u32(&format!("{arch}.block_count"), self.n_layers as u32)
            .meta_u32(&format!("{arch}.embedding_length"), self.n_embd as u32)
            .meta_u32(&format!("{arch}.feed_forward_length"), self.n_ff as u32)
            .meta_u32(&format!("{arch}.attention.head_count"), self.n_heads as u32)
            .meta_u32(&format!("{arch}.attention.head_count_kv"), self.n_kv_heads as u32)
            .meta_u32(&format!("{arch}.context_length"), self.context as u32)
            .meta_f32(&format!("{arch}.rope.freq_base"), 10000.0)
            .meta_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5)
            .meta_str("tokenizer.ggml.model", "gpt2")
            .meta_str("tokenizer.ggml.pre", if self.arch == Architecture::Qwen2 { "qwen2" } else { "smollm" })
            .meta_strings("tokenizer.ggml.tokens", &vocab_tokens)
            .meta_strings("tokenizer.ggml.merges", &merges)
            .meta(
                "tokenizer.ggml.token_type",
                Value::Array(ValueType::I32, types.iter().map(|&t| Value::I32(t)).collect()),
            )
            .meta_u32("tokenizer.ggml.bos_token_id", 0)
            .meta_u32("tokenizer.ggml.eos_token_id", 1)
            .meta("tokenizer.ggml.add_bos_token", Value::Bool(false))
            .meta_str(
                "tokenizer.chat_template",
                "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
            );

        let mut next_format = 0usize;
        let mut matrix =
            |w: &mut GgufWriter, rng: &mut TestRng, name: &str, rows: usize, cols: usize| {
                let ty = self.formats[next_format % self.formats.len()];
                next_format += 1;
                let scale = 1.0 / (cols as f32).sqrt() * 2.0;
                w.tensor(
                    name,
                    &[cols as u64, rows as u64],
                    ty,
                    random_blocks(ty, rows * cols, scale, rng),
                );
            };
        let norm = |rng: &mut TestRng, n: usize| -> Vec<f32> {
            (0..n).map(|_| 1.0 + 0.2 * rng.symmetric()).collect()
        };

        w.tensor(
            "token_embd.weight",
            &[self.n_embd as u64, vocab as u64],
            GgmlType::Q8_0,
            random_blocks(GgmlType::Q8_0, vocab * self.n_embd, 1.0, &mut rng),
        );
        for l in 0..self.n_layers {
            let n = |s: &str| format!("blk.{l}.{s}");
            let v = norm(&mut rng, self.n_embd);
            w.tensor_f32(&n("attn_norm.weight"), &[self.n_embd as u64], &v);
            matrix(
                &mut w,
                &mut rng,
                &n("attn_q.weight"),
                self.n_embd,
                self.n_embd,
            );
            matrix(&mut w, &mut rng, &n("attn_k.weight"), kv, self.n_embd);
            matrix(&mut w, &mut rng, &n("attn_v.weight"), kv, self.n_embd);
            if self.arch == Architecture::Qwen2 {
                for (name, len) in [
                    ("attn_q.bias", self.n_embd),
                    ("attn_k.bias", kv),
                    ("attn_v.bias", kv),
                ] {
                    let b = rng.floats(len, 0.5);
                    w.tensor_f32(&n(name), &[len as u64], &b);
                }
            }
            matrix(
                &mut w,
                &mut rng,
                &n("attn_output.weight"),
                self.n_embd,
                self.n_embd,
            );
            let v = norm(&mut rng, self.n_embd);
            w.tensor_f32(&n("ffn_norm.weight"), &[self.n_embd as u64], &v);
            matrix(
                &mut w,
                &mut rng,
                &n("ffn_gate.weight"),
                self.n_ff,
                self.n_embd,
            );
            matrix(
                &mut w,
                &mut rng,
                &n("ffn_up.weight"),
                self.n_ff,
                self.n_embd,
            );
            matrix(
                &mut w,
                &mut rng,
                &n("ffn_down.weight"),
                self.n_embd,
                self.n_ff,
            );
        }
        let v = norm(&mut rng, self.n_embd);
        w.tensor_f32("output_norm.weight", &[self.n_embd as u64], &v);
        if self.separate_output {
            w.tensor(
                "output.weight",
                &[self.n_embd as u64, vocab as u64],
                GgmlType::Q6_K,
                random_blocks(GgmlType::Q6_K, vocab * self.n_embd, 0.2, &mut rng),
            );
        }
        w
    }
}

/// A byte-level vocabulary: two control tokens, the 256 byte symbols, and a few merges.
fn tiny_vocab() -> (Vec<String>, Vec<String>, Vec<i32>) {
    let mut tokens = vec!["<|im_start|>".to_owned(), "<|im_end|>".to_owned()];
    let mut types = vec![3, 3];
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xa1..=0xac).contains(&b) || b >= 0xae;
    let mut n = 0u32;
    for b in 0..=255u8 {
        let ch = if printable(b) {
            b as char
        } else {
            n += 1;
            char::from_u32(255 + n).unwrap_or('?')
        };
        tokens.push(ch.to_string());
        types.push(1);
    }
    let merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s"];
    for m in merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    (
        tokens,
        merges.iter().map(|s| s.to_string()).collect(),
        types,
    )
}
