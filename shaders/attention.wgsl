// Attention of each block token over the KV cache and the block entries it may see (causal or
// tree mask). One workgroup per (token, head).
//
// Token t sees slots 0..base (the cache before this forward) followed by the block entries
// listed in visible[t] (in block order). Scores are laid out in that order, so a token's
// reduction order is the same whether it arrives alone, in a causal block, or on a tree
// branch: batch-invariant.

struct Params {
    n_heads: u32,
    n_kv_heads: u32,
    head_dim: u32,
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

@group(0) @binding(0) var<storage, read> q: array<f32>;               // [m, n_heads * head_dim]
@group(0) @binding(1) var<storage, read> k_cache: array<f32>;         // [capacity, kv_dim]
@group(0) @binding(2) var<storage, read> v_cache: array<f32>;         // [capacity, kv_dim]
@group(0) @binding(3) var<storage, read_write> scores: array<f32>;    // [max_rows, n_heads, capacity]
@group(0) @binding(4) var<storage, read_write> out: array<f32>;       // [m, n_heads * head_dim]
@group(0) @binding(5) var<storage, read> visible: array<u32>;         // [max_rows, 1 + max_rows]: count, then block indices
@group(0) @binding(6) var<uniform> p: Params;
@group(0) @binding(7) var<uniform> step: Step;

var<workgroup> red: array<f32, 64>;

fn slot_of(t: u32, k: u32) -> u32 {
    if (k < step.base) {
        return k;
    }
    return step.base + visible[t * (1u + p.max_rows) + 1u + (k - step.base)];
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let head = wid.x;
    let t = wid.y;
    if (t >= step.m) {
        return;
    }
    let hd = p.head_dim;
    let kv_dim = p.n_kv_heads * hd;
    let kvh = head / (p.n_heads / p.n_kv_heads);
    let n_slots = step.base + visible[t * (1u + p.max_rows)];
    let qb = (t * p.n_heads + head) * hd;
    let sb = (t * p.n_heads + head) * p.capacity;

    // Scores and their maximum.
    var mx = bitcast<f32>(0xff7fffffu); // -f32::MAX (a decimal literal can round out of range)
    for (var k = lid; k < n_slots; k += 64u) {
        let kb = slot_of(t, k) * kv_dim + kvh * hd;
        var s = 0.0;
        for (var d = 0u; d < hd; d++) {
            s += q[qb + d] * k_cache[kb + d];
        }
        s *= p.scale;
        scores[sb + k] = s;
        mx = max(mx, s);
    }
    red[lid] = mx;
    workgroupBarrier();
    for (var r = 32u; r > 0u; r >>= 1u) {
        if (lid < r) {
            red[lid] = max(red[lid], red[lid + r]);
        }
        workgroupBarrier();
    }
    mx = red[0];
    workgroupBarrier();

    // Exponentials and their sum.
    var sum = 0.0;
    for (var k = lid; k < n_slots; k += 64u) {
        let e = exp(scores[sb + k] - mx);
        scores[sb + k] = e;
        sum += e;
    }
    red[lid] = sum;
    workgroupBarrier();
    for (var r = 32u; r > 0u; r >>= 1u) {
        if (lid < r) {
            red[lid] += red[lid + r];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / red[0];
    storageBarrier();
    workgroupBarrier();

    // Weighted sum of values, one output dimension per thread (two when head_dim > 64).
    for (var d = lid; d < hd; d += 64u) {
        var acc = 0.0;
        for (var k = 0u; k < n_slots; k++) {
            acc += (scores[sb + k] * inv) * v_cache[slot_of(t, k) * kv_dim + kvh * hd + d];
        }
        out[qb + d] = acc;
    }
}
