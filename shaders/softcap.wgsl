// Final logit soft-capping (Gemma 3): logits = cap * tanh(logits / cap), in place, before the
// argmax and top-k kernels read them: one workgroup per row (a vocabulary of 262,144 takes
// too many workgroups for one dimension at one per 64 logits). tanh from exp, saturated where
// it is 1 to f32 precision.

struct Params {
    n: u32,   // vocabulary (row length)
    cap: f32,
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    m: u32,
    base: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read_write> logits: array<f32>; // [m, n]
@group(0) @binding(1) var<uniform> p: Params;
@group(0) @binding(2) var<uniform> step: Step;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    if (t >= step.m) {
        return;
    }
    for (var i = t * p.n + lid; i < (t + 1u) * p.n; i += 64u) {
        let u = logits[i] / p.cap;
        let a = min(abs(u), 10.0);
        let e = exp(-2.0 * a);
        logits[i] = p.cap * (sign(u) * (1.0 - e) / (1.0 + e));
    }
}
