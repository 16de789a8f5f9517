// What both attention kernels (attention.wgsl, attention_split_kv.wgsl) share: parameters,
// bindings, the head dimension and the slot a visible entry lives in. Prepended to each.

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,   // = HD
    capacity: u32,   // KV cache slots (stride of the score scratch)
    max_rows: u32,   // stride of `visible`
    scale: f32,      // 1 / sqrt(head_dim)
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;          // [m, n_heads * head_dim / 4]
@group(0) @binding(1) var<storage, read> k_cache: array<vec4<f32>>;    // [capacity, kv_dim / 4]
@group(0) @binding(2) var<storage, read> v_cache: array<vec4<f32>>;    // [capacity, kv_dim / 4]
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;     // [max_rows, n_heads, capacity]
@group(0) @binding(4) var<storage, read_write> out: array<vec4<f32>>;  // [m, n_heads * head_dim / 4]
@group(0) @binding(5) var<storage, read> visible: array<u32>;          // [max_rows, 1 + max_rows]: count, then block indices
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;

// Head dimension, a multiple of 4, at most 128.
override HD: u32 = 64u;

fn slot_of(t: u32, k: u32) -> u32 {
    if (k < step.base) {
        return k;
    }
    return step.base + visible[t * (1u + p.max_rows) + 1u + (k - step.base)];
}
