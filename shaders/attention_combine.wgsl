// Attention, second half: merges each (token, head) pair's chunk partials (attention.wgsl or
// attention_split_kv.wgsl, see attention_io.wgsl) in chunk order into its output row. One
// invocation per (token, head, vec4 of the head): the maximum of the chunk maxima, then the
// chunk sums and value sums rescaled to it and added chunk by chunk, then one division. A
// token's chunks depend only on how many slots it sees, so the result is batch-invariant.

// The attention's parameters (attention_io.wgsl's layout; this kernel reads head_dim,
// max_rows, chunk and max_chunks).
struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
    capacity: u32,
    max_rows: u32,
    scale: f32,
    chunk: u32,
    max_chunks: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> partials: array<vec4<f32>>; // [max_rows, n_heads, max_chunks, 1 + head_dim / 4]
@group(0) @binding(1) var<storage, read_write> out: array<vec4<f32>>; // [m, n_heads * head_dim / 4]
@group(0) @binding(2) var<storage, read> visible: array<u32>;         // [max_rows, 1 + max_rows]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let hd4 = p.head_dim / 4u;
    if (gid.x >= step.m * p.n_heads * hd4) {
        return;
    }
    let pair = gid.x / hd4;
    let d = gid.x % hd4;
    let t = pair / p.n_heads;
    let n_slots = step.base + visible[t * (1u + p.max_rows)];
    let chunks = (n_slots + p.chunk - 1u) / p.chunk;
    let pb = pair * p.max_chunks * (1u + hd4);

    var mx = partials[pb].x;
    for (var c = 1u; c < chunks; c++) {
        mx = max(mx, partials[pb + c * (1u + hd4)].x);
    }
    var sum = 0.0;
    var acc = vec4<f32>(0.0);
    for (var c = 0u; c < chunks; c++) {
        let rec = pb + c * (1u + hd4);
        let f = exp(partials[rec].x - mx);
        sum += partials[rec].y * f;
        acc += partials[rec + 1u + d] * f;
    }
    out[gid.x] = acc / sum;
}
