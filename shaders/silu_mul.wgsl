// The SiLU-gated FFN's elementwise step: out = silu(gate) * up, from the one gate/up product
// of a layer (each row [gate | up]).

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

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i >= step.m * p.n) {
        return;
    }
    let row = (i / p.n) * 2u * p.n + i % p.n;
    let g = gate_up[row];
    out[i] = g / (1.0 + exp(-g)) * gate_up[row + p.n];
}
