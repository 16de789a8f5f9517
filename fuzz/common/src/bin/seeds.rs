//! Writes the seed corpora of the fuzz targets (nothing binary is committed):
//!
//!     cargo run --manifest-path fuzz/Cargo.toml -p runahead-fuzz-common --bin seeds [-- DIR]
//!
//! into DIR/<target>/ (default fuzz/corpus). Seeds: the generated test models, small files
//! cut from the real models' headers (a few dozen tokens, their real metadata and template),
//! hand-made files covering every value and tensor type; texts for the tokenizer; the real
//! chat templates with conversations for the template target. The real models are read from
//! `RUNAHEAD_MODELS` or `models/`; without them their seeds are skipped with a warning.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use runahead_fuzz_common::{models_dir, ChatInput, QWEN, SMOLLM2};
use runahead_gguf::{Array, GgmlType, GgufFile, GgufWriter, Metadata, Value, ValueType};
use runahead_model::testing::{TestRng, TinyModel};
use runahead_model::{ChatMessage, Plan};

/// Tokens kept (besides control tokens) in the seeds cut from the real models: enough for
/// real merges to apply, few enough that a seed stays tens of KB.
const KEEP_TOKENS: usize = 64;

fn main() {
    let out = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../corpus"));
    let real: Vec<(&str, GgufFile)> = [SMOLLM2, QWEN]
        .into_iter()
        .filter_map(|name| match GgufFile::open(models_dir().join(name)) {
            Ok(file) => Some((name, file)),
            Err(e) => {
                eprintln!("seeds: skipping {name}: {e}");
                None
            }
        })
        .collect();

    let tiny_bytes = TinyModel::llama().to_gguf();
    let tiny = GgufFile::from_bytes(tiny_bytes.clone()).expect("tiny model parses");
    let mut gguf = vec![
        ("tiny_llama.gguf".to_owned(), tiny_bytes),
        ("tiny_qwen2.gguf".to_owned(), TinyModel::qwen2().to_gguf()),
        ("tiny_llama_header.gguf".to_owned(), header_only(&tiny)),
        ("small_llama.gguf".to_owned(), small_model(&tiny)),
        ("empty.gguf".to_owned(), GgufWriter::new().to_bytes()),
        ("value_types.gguf".to_owned(), value_types()),
        ("tensor_types.gguf".to_owned(), tensor_types()),
    ];
    for (name, file) in &real {
        gguf.push((format!("{name}.cut"), cut_real(file)));
    }
    write(&out, "gguf_load", &gguf);

    let texts = [
        "Hello, world!",
        "The quick brown fox jumps over the lazy dog. It's 12345 o'clock; we'll see.",
        "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "<|endoftext|><|im_end|><repo_name>x<file_sep>",
        "日本語のテキスト、中文，한국어 😀👍🏽 e\u{301} \u{200d}\u{feff}",
        "   leading and trailing   \t\n\n\r\n  ",
        "0000000000 3.14159 1e-10 -42",
    ];
    let texts: Vec<(String, Vec<u8>)> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("text{i}"), t.as_bytes().to_vec()))
        .collect();
    write(&out, "tokenizer", &texts);

    let mut templates = vec![
        ("tiny".to_owned(), template_of(&tiny)),
        (
            "methods".to_owned(),
            "{{ messages[0].content.strip().upper() }}{{ raise_exception('x') if not messages }}"
                .to_owned(),
        ),
        (
            "namespace".to_owned(),
            "{% set ns = namespace(sys='') %}{% for m in messages %}{% if m.role == 'system' %}\
             {% set ns.sys = ns.sys + m.content %}{% endif %}{% endfor %}{{ ns.sys | tojson }}\
             {% for m in messages[1:] | selectattr('role', 'eq', 'user') %}{{ loop.index }}\
             {{ m.content | trim | length }}{% endfor %}"
                .to_owned(),
        ),
        (
            "macro".to_owned(),
            "{% macro turn(m) %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endmacro %}\
             {% for m in messages %}{{ turn(m) }}{% endfor %}{{ bos_token ~ eos_token }}"
                .to_owned(),
        ),
    ];
    for (name, file) in &real {
        templates.push((name.to_string(), template_of(file)));
    }
    let conversation = [
        ChatMessage::new("system", "You are a helpful assistant."),
        ChatMessage::new("user", "Hi! What is 2+2?"),
        ChatMessage::new("assistant", "4."),
        ChatMessage::new("tool", "{\"result\": 4}"),
        ChatMessage::new("user", "ünï 😀 <|im_end|>"),
    ];
    let mut chats = Vec::new();
    for (name, source) in &templates {
        for (suffix, messages) in [("one", &conversation[1..2]), ("all", &conversation[..])] {
            let input = ChatInput {
                source: source.clone(),
                bos: "<|im_start|>".into(),
                eos: "<|im_end|>".into(),
                messages: messages.to_vec(),
                add_generation_prompt: true,
            };
            chats.push((format!("{name}.{suffix}"), input.to_bytes()));
        }
    }
    write(&out, "chat_template", &chats);
}

fn write(root: &Path, target: &str, seeds: &[(String, Vec<u8>)]) {
    let dir = root.join(target);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut total = 0;
    for (name, bytes) in seeds {
        let path = dir.join(format!("seed-{name}"));
        std::fs::write(&path, bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        total += bytes.len();
    }
    println!("{}: {} seeds, {total} bytes", dir.display(), seeds.len());
}

fn template_of(file: &GgufFile) -> String {
    file.header
        .metadata
        .str("tokenizer.chat_template")
        .unwrap_or_default()
        .to_owned()
}

/// A writer holding `meta`'s entries in order (values from `replace` where it has the key,
/// keys it maps to `None` dropped).
fn copy_meta(meta: &Metadata, replace: &HashMap<&str, Option<Value>>) -> GgufWriter {
    let mut w = GgufWriter::new();
    for (key, value) in meta.iter() {
        match replace.get(key) {
            Some(Some(v)) => w.meta(key, v.clone()),
            Some(None) => &mut w,
            None => w.meta(key, value.clone()),
        };
    }
    w
}

/// The metadata of a file without its tensors.
fn header_only(file: &GgufFile) -> Vec<u8> {
    copy_meta(&file.header.metadata, &HashMap::new()).to_bytes()
}

/// A complete model in a few KB (the generated ones take 1 MB, which slows every mutation):
/// the tiny model's metadata with the smallest dimensions its config accepts, and every tensor
/// that config reads, in F16 (vectors in F32).
fn small_model(tiny: &GgufFile) -> Vec<u8> {
    let dims = [
        ("llama.block_count", 1),
        ("llama.embedding_length", 8),
        ("llama.feed_forward_length", 16),
        ("llama.attention.head_count", 2),
        ("llama.attention.head_count_kv", 1),
        ("llama.context_length", 16),
    ];
    let replace: HashMap<&str, Option<Value>> = dims
        .iter()
        .map(|&(k, v)| (k, Some(Value::U32(v))))
        .collect();
    let mut w = copy_meta(&tiny.header.metadata, &replace);
    let meta = GgufFile::from_bytes(w.to_bytes())
        .expect("metadata parses")
        .header
        .metadata;
    let vocab = meta.array("tokenizer.ggml.tokens").expect("tokens").len();
    // A tied output (no `output.weight`) and llama's separate projections.
    let has_tensor = |name: &str| name != "output.weight";
    let plan = Plan::from_metadata(&meta, vocab, &has_tensor).expect("small plan");
    for spec in plan.tensors() {
        let n: u64 = spec.shape.iter().product();
        if spec.shape.len() == 1 {
            w.tensor_f32(&spec.name, &spec.shape, &vec![1.0; n as usize]);
        } else {
            w.tensor(
                &spec.name,
                &spec.shape,
                GgmlType::F16,
                vec![0; 2 * n as usize],
            );
        }
    }
    w.to_bytes()
}

/// A real model cut small: its metadata with the vocabulary cut to the first
/// [`KEEP_TOKENS`] tokens plus every control token (special-token ids remapped), the merges
/// among those, and a token embedding and output norm of the real width.
fn cut_real(file: &GgufFile) -> Vec<u8> {
    let meta = &file.header.metadata;
    let tokens: Vec<&str> = meta
        .strings("tokenizer.ggml.tokens")
        .expect("tokens")
        .iter()
        .collect();
    let types: Vec<Value> = meta
        .array("tokenizer.ggml.token_type")
        .expect("token types")
        .values()
        .collect();
    let special = |i: usize| matches!(types[i].as_u64(), Some(3 | 4));
    let kept: Vec<usize> = (0..tokens.len())
        .filter(|&i| i < KEEP_TOKENS || special(i))
        .collect();
    let new_id: HashMap<usize, usize> = kept.iter().enumerate().map(|(n, &o)| (o, n)).collect();
    let kept_text: HashSet<&str> = kept.iter().map(|&i| tokens[i]).collect();
    let merges: Vec<&str> = meta
        .strings("tokenizer.ggml.merges")
        .expect("merges")
        .iter()
        .filter(|m| {
            m.split_once(' ').is_some_and(|(a, b)| {
                kept_text.contains(a)
                    && kept_text.contains(b)
                    && kept_text.contains(&*(a.to_owned() + b))
            })
        })
        .collect();
    let strings = |items: Vec<&str>| Value::Array(Array::String(items.iter().collect()));
    let mut replace: HashMap<&str, Option<Value>> = HashMap::new();
    replace.insert(
        "tokenizer.ggml.tokens",
        Some(strings(kept.iter().map(|&i| tokens[i]).collect())),
    );
    let elem = types.first().map_or(ValueType::I32, |v| v.value_type());
    replace.insert(
        "tokenizer.ggml.token_type",
        Array::from_values(elem, kept.iter().map(|&i| types[i].clone())).map(Value::Array),
    );
    replace.insert("tokenizer.ggml.merges", Some(strings(merges)));
    for (key, value) in meta.iter() {
        if key.ends_with("_token_id") {
            let id = value.as_u64().and_then(|v| new_id.get(&(v as usize)));
            replace.insert(key, id.map(|&n| Value::U32(n as u32)));
        }
    }
    let mut w = copy_meta(meta, &replace);
    let arch = meta.str("general.architecture").expect("architecture");
    let width = meta
        .u64(&format!("{arch}.embedding_length"))
        .expect("embedding length");
    let rows = kept.len() as u64;
    let embd_bytes = GgmlType::Q4_0
        .bytes_for(width * rows)
        .expect("whole blocks");
    w.tensor(
        "token_embd.weight",
        &[width, rows],
        GgmlType::Q4_0,
        vec![0; embd_bytes as usize],
    );
    w.tensor_f32("output_norm.weight", &[width], &vec![1.0; width as usize]);
    w.to_bytes()
}

/// One metadata value of every type, arrays of each, and nested arrays.
fn value_types() -> Vec<u8> {
    let scalars = [
        Value::U8(1),
        Value::I8(-1),
        Value::U16(2),
        Value::I16(-2),
        Value::U32(3),
        Value::I32(-3),
        Value::U64(4),
        Value::I64(-4),
        Value::F32(0.5),
        Value::F64(-0.25),
        Value::Bool(true),
        Value::String("s".into()),
    ];
    let mut w = GgufWriter::new();
    w.meta_u32("general.alignment", 64);
    for (i, v) in scalars.iter().enumerate() {
        w.meta(&format!("scalar.{i}"), v.clone());
        w.meta(
            &format!("array.{i}"),
            Value::Array(Array::from_values(v.value_type(), [v.clone(), v.clone()]).expect("one type")),
        );
    }
    let inner = Array::U32(vec![7]);
    w.meta(
        "array.nested",
        Value::Array(Array::Array(vec![inner.clone(), inner])),
    );
    w.to_bytes()
}

/// One block of every tensor type the format knows (random bytes: the decoders must take
/// any bit pattern), as vectors and as a 2-row matrix.
fn tensor_types() -> Vec<u8> {
    let mut rng = TestRng::new(7);
    let mut w = GgufWriter::new();
    for ty in GgmlType::all() {
        let (n, bytes) = (ty.block_size(), ty.block_bytes() as usize);
        w.tensor(&format!("v.{ty}"), &[n], ty, rng.bytes(bytes));
        w.tensor(&format!("m.{ty}"), &[n, 2], ty, rng.bytes(2 * bytes));
    }
    w.to_bytes()
}
