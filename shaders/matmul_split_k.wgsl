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

// Prepended with matmul_io.wgsl (parameters, bindings) and one matmul_input*.wgsl (what the
// input is: as stored, RMS-normalized as it is read, or silu(gate) * up).

// Tokens per workgroup: 1, 4 or 8.
override TILE: u32 = 8u;

const SPLIT: u32 = 8u;               // invocations per row (one per quad of a unit)
const ROWS_PER_GROUP: u32 = 8u;      // 64 invocations / SPLIT

// [row in group, token slot, split]: the partial sums of each (row, token).
var<workgroup> partial: array<f32, 512>;

// [token slot, split]: each token's sum of squares of its input, per invocation of a row
// (NORMED inputs; every row of the group computes the same sums, row 0 writes them).
var<workgroup> squares: array<f32, 64>;

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
    var ss_lo = vec4<f32>(0.0); // their sums of squares (NORMED)
    var ss_hi = vec4<f32>(0.0);
    let units = p.k / 32u;
    for (var u = 0u; u < units; u++) {
        let w = quad(unit_head(row, u), j);
        let b = u * 8u + j;
        let v0 = x_at(t0, b);
        if (TILE == 1u) {
            lo = lo + vec4<f32>(dot(w, x_weighted(v0, b)), 0.0, 0.0, 0.0);
            if (NORMED) {
                ss_lo = ss_lo + vec4<f32>(dot(v0, v0), 0.0, 0.0, 0.0);
            }
        } else {
            let v1 = x_at(t0 + 1u, b);
            let v2 = x_at(t0 + 2u, b);
            let v3 = x_at(t0 + 3u, b);
            lo = lo + vec4<f32>(
                dot(w, x_weighted(v0, b)),
                dot(w, x_weighted(v1, b)),
                dot(w, x_weighted(v2, b)),
                dot(w, x_weighted(v3, b)),
            );
            if (NORMED) {
                ss_lo = ss_lo + vec4<f32>(dot(v0, v0), dot(v1, v1), dot(v2, v2), dot(v3, v3));
            }
            if (TILE >= 8u) {
                let v4 = x_at(t0 + 4u, b);
                let v5 = x_at(t0 + 5u, b);
                let v6 = x_at(t0 + 6u, b);
                let v7 = x_at(t0 + 7u, b);
                hi = hi + vec4<f32>(
                    dot(w, x_weighted(v4, b)),
                    dot(w, x_weighted(v5, b)),
                    dot(w, x_weighted(v6, b)),
                    dot(w, x_weighted(v7, b)),
                );
                if (NORMED) {
                    ss_hi = ss_hi + vec4<f32>(dot(v4, v4), dot(v5, v5), dot(v6, v6), dot(v7, v7));
                }
            }
        }
    }
    if (NORMED && r == 0u) {
        squares[j] = ss_lo.x;
        squares[SPLIT + j] = ss_lo.y;
        squares[2u * SPLIT + j] = ss_lo.z;
        squares[3u * SPLIT + j] = ss_lo.w;
        squares[4u * SPLIT + j] = ss_hi.x;
        squares[5u * SPLIT + j] = ss_hi.y;
        squares[6u * SPLIT + j] = ss_hi.z;
        squares[7u * SPLIT + j] = ss_hi.w;
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
        var ss = 0.0;
        for (var s = 0u; s < SPLIT; s++) {
            acc += partial[first + s];
            if (NORMED) {
                ss += squares[j * SPLIT + s];
            }
        }
        let i = t * p.y_stride + p.col0 + o;
        let v = finish(acc, ss);
        y[i] = select(v, y[i] + v, p.accumulate == 1u);
    }
}
