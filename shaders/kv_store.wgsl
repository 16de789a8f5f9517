// Appends the block's keys and values to a layer's cache at slots base..base+m as f16, two to a
// word (the cache's precision on every engine; prepended with kv_f16.wgsl). One invocation per
// word: a pair of adjacent values.

struct Params {
    kv_dim: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> k: array<f32>;               // [m, kv_dim]
@group(0) @binding(1) var<storage, read> v: array<f32>;               // [m, kv_dim]
@group(0) @binding(2) var<storage, read_write> k_cache: array<u32>;   // [capacity, kv_dim / 2]
@group(0) @binding(3) var<storage, read_write> v_cache: array<u32>;   // [capacity, kv_dim / 2]
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let words = p.kv_dim / 2u;
    if (i >= step.m * words) {
        return;
    }
    let dst = step.base * words + i;
    k_cache[dst] = f16_bits(k[2u * i]) | (f16_bits(k[2u * i + 1u]) << 16u);
    v_cache[dst] = f16_bits(v[2u * i]) | (f16_bits(v[2u * i + 1u]) << 16u);
}
