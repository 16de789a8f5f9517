// Index of the largest logit of each row (lowest index on ties, NaN never wins), so a greedy
// step reads back 4 bytes per token instead of the vocabulary. A row whose logits are all NaN
// or -inf gets 0xffffffff (no token to pick; the engine reports it as an error).

struct Params {
    n: u32, // vocabulary size
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

@group(0) @binding(0) var<storage, read> logits: array<f32>;     // [m, n]
@group(0) @binding(1) var<storage, read_write> out: array<u32>;  // [m]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;

fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    // NaN compares false both ways; -inf losers keep the lowest index.
    return v > bv || (v == bv && i < bi) || (bv != bv && v == v);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    if (t >= step.m) {
        return;
    }
    var bv = bitcast<f32>(0xff7fffffu); // -f32::MAX (a decimal literal can round out of range)
    var bi = 0xffffffffu;
    for (var i = lid; i < p.n; i += 64u) {
        let v = logits[t * p.n + i];
        if (better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var r = 32u; r > 0u; r >>= 1u) {
        if (lid < r && better(best_v[lid + r], best_i[lid + r], best_v[lid], best_i[lid])) {
            best_v[lid] = best_v[lid + r];
            best_i[lid] = best_i[lid + r];
        }
        workgroupBarrier();
    }
    if (lid == 0u) {
        out[t] = best_i[0];
    }
}
