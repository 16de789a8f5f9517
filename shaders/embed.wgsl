// out[t, :] = row tokens[t] of the (quantized) embedding table, for the tokens whose row lies
// in this piece of the table, times `scale` where `scaled` (Gemma's sqrt(n_embd)). Prepended with formats/common.wgsl and one formats/*.wgsl
// (`unit_head`, `quad`).

struct Params {
    k: u32,         // row length
    row_start: u32, // first table row in this piece
    row_end: u32,
    row_bytes: u32,
    scaled: u32,
    scale: f32,
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;      // [m]
@group(0) @binding(2) var<storage, read_write> out: array<f32>;   // [m, k]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let units = p.k / 32u;
    let t = gid.x / units;
    let u = gid.x % units;
    if (t >= step.m) {
        return;
    }
    let token = tokens[t];
    if (token < p.row_start || token >= p.row_end) {
        return;
    }
    let h = unit_head((token - p.row_start) * p.row_bytes, u);
    let o = t * p.k + u * 32u;
    for (var i = 0u; i < 8u; i++) {
        var v = quad(h, i);
        if (p.scaled == 1u) {
            v *= p.scale;
        }
        out[o + 4u * i] = v.x;
        out[o + 4u * i + 1u] = v.y;
        out[o + 4u * i + 2u] = v.z;
        out[o + 4u * i + 3u] = v.w;
    }
}
