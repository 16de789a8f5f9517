// y[t, col0 + o] (+)= sum_k W[o, k] * x[t, k], shaped for real GPUs. Prepended with
// formats/common.wgsl and one formats/*.wgsl (`unit_head`, `quad`).
//
// Each row is split over SPLIT = 8 invocations: invocation j of a row decodes quad j of every
// 32-weight unit, so the 8 invocations of a row read one unit's bytes together and walk the
// row in step (coalesced reads, many rows in flight). A workgroup of 64 holds 8 rows and a tile
// of TILE tokens (pipeline constant: 1, 4 or 8): each weight quad is decoded once per tile.
// The 8 partial sums of a (row, token) meet in workgroup memory and one invocation adds them.
// matmul.wgsl is the other shape, for GPUs emulated on a CPU, where barriers are expensive.
//
// Batch invariance: a (row, token) value is the sum over units of dot(quad, x) per invocation,
// then the 8 partials added in invocation order, the same expression in every token slot of
// every TILE variant: bit-identical whatever the block size M or the token's place in it.

// Prepended with matmul_io.wgsl (parameters, bindings).

// Tokens per workgroup: 1, 4 or 8.
override TILE: u32 = 8u;

const SPLIT: u32 = 8u;               // invocations per row (one per quad of a unit)
const ROWS_PER_GROUP: u32 = 8u;      // 64 invocations / SPLIT

// [row in group, token slot, split]: the partial sums of each (row, token).
var<workgroup> partial: array<f32, 512>;

// Quad b of the activations of token t (zero past the block: those loads are skipped).
fn x_at(t: u32, b: u32) -> vec4<f32> {
    if (t < step.m) {
        return x[t * (p.k / 4u) + b];
    }
    return vec4<f32>(0.0);
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = lid / SPLIT;
    let j = lid % SPLIT;
    let o = (wid.x + wid.y * 65535u) * ROWS_PER_GROUP + r;
    let t0 = wid.z * TILE;
    // Rows past the matrix decode its last row and are not stored (every invocation must
    // reach the barrier).
    let row = min(o, p.n - 1u) * p.row_bytes;
    var lo = vec4<f32>(0.0); // tokens t0..t0+4
    var hi = vec4<f32>(0.0); // tokens t0+4..t0+8
    let units = p.k / 32u;
    for (var u = 0u; u < units; u++) {
        let w = quad(unit_head(row, u), j);
        let b = u * 8u + j;
        if (TILE == 1u) {
            lo = lo + vec4<f32>(dot(w, x_at(t0, b)), 0.0, 0.0, 0.0);
        } else {
            lo = lo + vec4<f32>(
                dot(w, x_at(t0, b)),
                dot(w, x_at(t0 + 1u, b)),
                dot(w, x_at(t0 + 2u, b)),
                dot(w, x_at(t0 + 3u, b)),
            );
            if (TILE >= 8u) {
                hi = hi + vec4<f32>(
                    dot(w, x_at(t0 + 4u, b)),
                    dot(w, x_at(t0 + 5u, b)),
                    dot(w, x_at(t0 + 6u, b)),
                    dot(w, x_at(t0 + 7u, b)),
                );
            }
        }
    }
    let cell = (r * TILE) * SPLIT + j;
    partial[cell] = lo.x;
    if (TILE >= 4u) {
        partial[cell + SPLIT] = lo.y;
        partial[cell + 2u * SPLIT] = lo.z;
        partial[cell + 3u * SPLIT] = lo.w;
    }
    if (TILE >= 8u) {
        partial[cell + 4u * SPLIT] = hi.x;
        partial[cell + 5u * SPLIT] = hi.y;
        partial[cell + 6u * SPLIT] = hi.z;
        partial[cell + 7u * SPLIT] = hi.w;
    }
    workgroupBarrier();
    // Invocation j of the row adds up token slot j.
    let t = t0 + j;
    if (j < TILE && t < step.m && o < p.n) {
        let first = (r * TILE + j) * SPLIT;
        var acc = 0.0;
        for (var s = 0u; s < SPLIT; s++) {
            acc += partial[first + s];
        }
        let i = t * p.y_stride + p.col0 + o;
        y[i] = select(acc, y[i] + acc, p.accumulate == 1u);
    }
}
