// y[t, col0 + o] (+)= sum_k W[o, k] * x[t, k]: a quantized weight matrix times a block of
// activation rows. Prepended with formats/common.wgsl and one formats/*.wgsl, which define
// `load_unit(row_byte, u)`: the 32 weights of unit u of the row starting at byte row_byte.
//
// One invocation computes one output row for up to TILE tokens, walking the row's units in
// order: no shared memory and no barriers (which CPU-emulated GPUs make expensive), and each
// (row, token) value is reduced in an order fixed by the row length alone, so a token's result
// is bit-identical whatever the block size M or its place in the block (batch invariance).

struct Params {
    k: u32,          // row length (elements), a multiple of 32
    n: u32,          // rows in this weight piece
    row_bytes: u32,  // bytes per weight row
    col0: u32,       // first output column this piece writes
    y_stride: u32,   // output row length
    accumulate: u32, // 1: add to y (residual connection), 0: overwrite
    _pad0: u32,
    _pad1: u32,
}

struct Step {
    m: u32,    // tokens in this forward
    base: u32, // KV cache length before this forward
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> weights: array<u32>;      // [n, row_bytes] raw blocks
@group(0) @binding(1) var<storage, read> x: array<f32>;            // [m, k]
@group(0) @binding(2) var<storage, read_write> y: array<f32>;      // [m, y_stride]
@group(0) @binding(3) var<uniform> p: Params;
@group(0) @binding(4) var<uniform> step: Step;

const TILE: u32 = 8u;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = gid.x + gid.y * 65535u * 64u;
    if (o >= p.n) {
        return;
    }
    let t0 = gid.z * TILE;
    let tn = min(TILE, step.m - t0);
    var acc: array<f32, 8>;
    let row = o * p.row_bytes;
    let units = p.k / 32u;
    for (var u = 0u; u < units; u++) {
        let v = load_unit(row, u);
        for (var t = 0u; t < tn; t++) {
            let xb = (t0 + t) * p.k + u * 32u;
            var s = 0.0;
            for (var j = 0u; j < 32u; j++) {
                s += v[j] * x[xb + j];
            }
            acc[t] += s;
        }
    }
    for (var t = 0u; t < tn; t++) {
        let i = (t0 + t) * p.y_stride + p.col0 + o;
        y[i] = select(acc[t], y[i] + acc[t], p.accumulate == 1u);
    }
}
