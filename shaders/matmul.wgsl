// y[t, col0 + o] (+)= sum_k W[o, k] * x[t, k]: a quantized weight matrix times a block of
// activation rows. Prepended with formats/common.wgsl and one formats/*.wgsl, which define
// `load_unit(row_byte, u)`: the 32 weights of unit u of the row starting at byte row_byte.
//
// A workgroup computes ROWS output rows for up to TILE tokens; THREADS threads share a row,
// thread i taking units i, i + THREADS, ... Each (row, token) value is reduced in an order
// fixed by the row length alone, so a token's result is bit-identical whatever the block
// size M or its place in the block (batch invariance).

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
const ROWS: u32 = 4u;
const THREADS: u32 = 16u;

var<workgroup> partial: array<f32, 512>; // [TILE, ROWS * THREADS]

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let o = (wid.x + wid.y * 65535u) * ROWS + lid / THREADS;
    let lane = lid % THREADS;
    let t0 = wid.z * TILE;
    let tn = min(TILE, step.m - t0);
    var acc: array<f32, 8>;
    if (o < p.n) {
        let row = o * p.row_bytes;
        let units = p.k / 32u;
        for (var u = lane; u < units; u += THREADS) {
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
    }
    for (var t = 0u; t < TILE; t++) {
        partial[t * 64u + lid] = acc[t];
    }
    workgroupBarrier();
    for (var s = THREADS / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var t = 0u; t < TILE; t++) {
                partial[t * 64u + lid] += partial[t * 64u + lid + s];
            }
        }
        workgroupBarrier();
    }
    if (lane == 0u && o < p.n) {
        for (var t = 0u; t < tn; t++) {
            let i = (t0 + t) * p.y_stride + p.col0 + o;
            let r = partial[t * 64u + lid];
            y[i] = select(r, y[i] + r, p.accumulate == 1u);
        }
    }
}
