// The GELU-gated FFN's elementwise step (Gemma 3): out = gelu_tanh(gate) * up, from the one
// gate/up product of a layer (each row [gate | up]). GELU in its tanh approximation, written as
// the reference writes it: 0.5 x (1 + tanh(sqrt(2 / pi) x (1 + 0.044715 x^2))).

struct Params {
    n: u32, // feed-forward width (out's row length; gate_up rows are 2n)
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

@group(0) @binding(0) var<storage, read> gate_up: array<f32>;  // [m, 2n]
@group(0) @binding(1) var<storage, read_write> out: array<f32>; // [m, n]
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<uniform> step: Step;

// tanh from exp, for |u| where exp does not overflow (WGSL's tanh has no error bound some
// drivers keep near 0); saturated past 10, where tanh is 1 to f32 precision.
fn tanh_of(u: f32) -> f32 {
    let a = min(abs(u), 10.0);
    let e = exp(-2.0 * a);
    return sign(u) * (1.0 - e) / (1.0 + e);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.m * p.n) {
        return;
    }
    let row = (i / p.n) * 2u * p.n + i % p.n;
    let g = gate_up[row];
    let gelu = 0.5 * g * (1.0 + tanh_of(0.7978846 * g * (1.0 + 0.044715 * g * g)));
    out[i] = gelu * gate_up[row + p.n];
}
