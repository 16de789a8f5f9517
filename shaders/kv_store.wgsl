// Appends the block's keys and values to a layer's cache at slots base..base+m, rounded to
// f16 precision (the cache's precision on every engine).

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
@group(0) @binding(2) var<storage, read_write> k_cache: array<f32>;   // [capacity, kv_dim]
@group(0) @binding(3) var<storage, read_write> v_cache: array<f32>;   // [capacity, kv_dim]
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<uniform> step: Step;

// Rounds to the nearest f16 value (ties to even), kept as f32. Done on the bits because
// pack2x16float's rounding is implementation-defined.
fn round_f16(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    let e = (bits >> 23u) & 0xffu;
    if (e < 113u) {
        // Below f16's normal range: multiples of 2^-24 (scaling by powers of two is exact).
        return round(x * 16777216.0) / 16777216.0;
    }
    let r = (bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u;
    if (((r >> 23u) & 0xffu) > 142u) {
        return bitcast<f32>((bits & 0x80000000u) | 0x7f800000u);
    }
    return bitcast<f32>(r);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.m * p.kv_dim) {
        return;
    }
    let dst = step.base * p.kv_dim + i;
    k_cache[dst] = round_f16(k[i]);
    v_cache[dst] = round_f16(v[i]);
}
