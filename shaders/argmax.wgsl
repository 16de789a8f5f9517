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

// 256 invocations a row, each walking every 256th logit four at a time (four loads in flight):
// one workgroup of 64 walking 768 logits each, one load after another, took 0.15 ms on an
// H200 for SmolLM2's 49,152, the slowest dispatch of a forward. `better` is a total order on
// the values that can win, so the result does not depend on who compared what.
const WG: u32 = 256u;

var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    // NaN compares false both ways; -inf losers keep the lowest index.
    return v > bv || (v == bv && i < bi) || (bv != bv && v == v);
}

// The logit of row `t` at `i`, or its last one past the row (never compared).
fn logit(t: u32, i: u32) -> f32 {
    return logits[t * p.n + min(i, p.n - 1u)];
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    if (t >= step.m) {
        return;
    }
    var bv = bitcast<f32>(0xff7fffffu); // -f32::MAX (a decimal literal can round out of range)
    var bi = 0xffffffffu;
    for (var i = lid; i < p.n; i += 4u * WG) {
        let v = vec4<f32>(
            logit(t, i),
            logit(t, i + WG),
            logit(t, i + 2u * WG),
            logit(t, i + 3u * WG),
        );
        for (var e = 0u; e < 4u; e++) {
            let at = i + e * WG;
            if (at < p.n && better(v[e], at, bv, bi)) {
                bv = v[e];
                bi = at;
            }
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    workgroupBarrier();
    for (var r = WG / 2u; r > 0u; r >>= 1u) {
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
