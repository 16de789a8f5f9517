//! Small generated models for tests: real GGUF files with seeded random weights in every
//! block format the engines support, and a tiny byte-level BPE vocabulary, so engines can be
//! compared quickly without a downloaded model (natively and in the browser).

use runahead_gguf::{Array, GgmlType, GgufWriter, Value};

use runahead_gguf::Gguf;

use crate::{Architecture, Plan};

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
    /// `attention.key_length`/`value_length` when set (otherwise `n_embd / n_heads`).
    pub head_dim: Option<usize>,
    /// A Llama 3 `rope_freqs.weight` (llama only).
    pub rope_freqs: bool,
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
            head_dim: None,
            rope_freqs: false,
        }
    }

    /// A Llama-3-style model: [`TinyModel::llama`] with `rope_freqs.weight`.
    pub fn llama3() -> Self {
        TinyModel {
            rope_freqs: true,
            seed: 3,
            ..Self::llama()
        }
    }

    /// A qwen3-style model: Q/K norms, head dim 128 (Q twice as wide as `n_embd`).
    pub fn qwen3() -> Self {
        TinyModel {
            arch: Architecture::Qwen3,
            head_dim: Some(128),
            separate_output: true,
            seed: 4,
            ..Self::llama()
        }
    }

    /// A gemma3-style model: head dim 128, layer 0 sliding (window 8, its own RoPE base),
    /// layer 1 global, post-norms, GELU, scaled embedding, final logit soft-capping.
    pub fn gemma3() -> Self {
        TinyModel {
            arch: Architecture::Gemma3,
            head_dim: Some(128),
            seed: 5,
            ..Self::llama()
        }
    }

    /// A phi3-style model: fused QKV and gate/up, partial rotary (48 of 64 dims), LongRoPE
    /// factors.
    pub fn phi3() -> Self {
        TinyModel {
            arch: Architecture::Phi3,
            separate_output: true,
            seed: 6,
            ..Self::llama()
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
        self.arch.name()
    }

    fn writer(&self) -> GgufWriter {
        if self.rope_freqs || !matches!(self.arch, Architecture::Llama | Architecture::Qwen2) {
            return self.plan_writer();
        }
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
                Value::Array(Array::I32(types.to_vec())),
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

impl TinyModel {
    /// The metadata every generated model has: sizes, RoPE, norm epsilon and the vocabulary.
    fn base_writer(&self) -> GgufWriter {
        let (vocab_tokens, merges, types) = tiny_vocab();
        let arch = self.arch_name();
        let mut w = GgufWriter::new();
        w.meta_str("general.architecture", arch)
            // Not named after the architecture: llama.cpp gives vocabularies of models named
            // "phi3" rules that need Phi's tokens.
            .meta_str("general.name", "tiny random-weight model")
            .meta_u32(&format!("{arch}.block_count"), self.n_layers as u32)
            .meta_u32(&format!("{arch}.embedding_length"), self.n_embd as u32)
            .meta_u32(&format!("{arch}.feed_forward_length"), self.n_ff as u32)
            .meta_u32(&format!("{arch}.attention.head_count"), self.n_heads as u32)
            .meta_u32(
                &format!("{arch}.attention.head_count_kv"),
                self.n_kv_heads as u32,
            )
            .meta_u32(&format!("{arch}.context_length"), self.context as u32)
            .meta_f32(&format!("{arch}.rope.freq_base"), 10000.0)
            .meta_f32(&format!("{arch}.attention.layer_norm_rms_epsilon"), 1e-5)
            .meta_str("tokenizer.ggml.model", "gpt2")
            .meta_str("tokenizer.ggml.pre", "smollm")
            .meta_strings("tokenizer.ggml.tokens", &vocab_tokens)
            .meta_strings("tokenizer.ggml.merges", &merges)
            .meta(
                "tokenizer.ggml.token_type",
                Value::Array(Array::I32(types.to_vec())),
            )
            .meta_u32("tokenizer.ggml.bos_token_id", 0)
            .meta_u32("tokenizer.ggml.eos_token_id", 1)
            .meta("tokenizer.ggml.add_bos_token", Value::Bool(false));
        w
    }

    /// A model of any architecture: its keys as llama.cpp's converter writes them, then every
    /// tensor its [`Plan`] reads, in order, with seeded random values.
    fn plan_writer(&self) -> GgufWriter {
        let mut w = self.base_writer();
        let arch = self.arch_name();
        let key = |k: &str| format!("{arch}.{k}");
        if let Some(hd) = self.head_dim {
            w.meta_u32(&key("attention.key_length"), hd as u32)
                .meta_u32(&key("attention.value_length"), hd as u32);
        }
        let head_dim = self.head_dim.unwrap_or(self.n_embd / self.n_heads);
        match self.arch {
            Architecture::Gemma3 => {
                w.set_meta(&key("rope.freq_base"), Value::F32(1_000_000.0))
                    .meta_u32(&key("attention.sliding_window"), 8)
                    .meta_u32(&key("attention.sliding_window_pattern"), 2)
                    .meta_f32(&key("final_logit_softcapping"), 30.0);
            }
            Architecture::Phi3 => {
                w.meta_u32(&key("rope.dimension_count"), (head_dim * 3 / 4) as u32)
                    .meta_u32(&key("rope.scaling.original_context_length"), 64)
                    .meta_f32(&key("rope.scaling.attn_factor"), 1.2)
                    .meta_u32(&key("attention.sliding_window"), 0);
            }
            _ => {}
        }
        let has = |name: &str| match name {
            "output.weight" => self.separate_output,
            "rope_freqs.weight" => self.rope_freqs,
            "rope_factors_long.weight" | "rope_factors_short.weight" => {
                self.arch == Architecture::Phi3
            }
            "blk.0.attn_qkv.weight" => self.arch == Architecture::Phi3,
            _ => false,
        };
        let header = Gguf::parse(&w.to_bytes()).expect("the metadata parses");
        let vocab = tiny_vocab().0.len();
        let plan = Plan::from_metadata(&header.metadata, vocab, &has).expect("a valid plan");
        let mut rng = TestRng::new(self.seed);
        let mut next_format = 0usize;
        for spec in plan.tensors() {
            let n: u64 = spec.shape.iter().product();
            let n = n as usize;
            let name = spec.name.as_str();
            if spec.shape.len() == 2 {
                let ty = if name == "token_embd.weight" {
                    GgmlType::Q8_0
                } else if name == "output.weight" {
                    GgmlType::Q6_K
                } else {
                    next_format += 1;
                    self.formats[(next_format - 1) % self.formats.len()]
                };
                let scale = match name {
                    "token_embd.weight" => 1.0,
                    "output.weight" => 0.2,
                    _ => 2.0 / (spec.shape[0] as f32).sqrt(),
                };
                w.tensor(name, &spec.shape, ty, random_blocks(ty, n, scale, &mut rng));
            } else {
                let values: Vec<f32> = if name.contains("rope_f") {
                    (0..n).map(|_| 1.0 + 3.0 * rng.symmetric().abs()).collect()
                } else {
                    (0..n).map(|_| 1.0 + 0.2 * rng.symmetric()).collect()
                };
                w.tensor_f32(name, &spec.shape, &values);
            }
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

/// SHA-256 of `bytes` in hex, for fixtures that record which generated file they were made
/// on (FIPS 180-4; tests only, no dependency for it).
pub fn sha256_hex(bytes: &[u8]) -> String {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = bytes.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((bytes.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let mut v = h;
        for i in 0..64 {
            let s1 = v[4].rotate_right(6) ^ v[4].rotate_right(11) ^ v[4].rotate_right(25);
            let ch = (v[4] & v[5]) ^ (!v[4] & v[6]);
            let t1 = v[7]
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = v[0].rotate_right(2) ^ v[0].rotate_right(13) ^ v[0].rotate_right(22);
            let maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
            let t2 = s0.wrapping_add(maj);
            v = [
                t1.wrapping_add(t2),
                v[0],
                v[1],
                v[2],
                v[3].wrapping_add(t1),
                v[4],
                v[5],
                v[6],
            ];
        }
        for (a, b) in h.iter_mut().zip(v) {
            *a = a.wrapping_add(b);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
}
