// y[t, col0 + o] (+)= sum_k W[o, k] * x[t, k], shaped for real GPUs. Prepended with
// formats/common.wgsl and one formats/*.wgsl (`unit_head`, `quad`).
//
// Each row is split over SPLIT invocations (pipeline constant: 8, 16, 32 or 64, chosen per
// matrix by `split_k_index` in kernels.rs): invocation j of a row decodes quad j % 8 of every
// (SPLIT / 8)th 32-weight unit, starting at unit j / 8, so a row's invocations read SPLIT / 8
// units' bytes together and walk the row in step (coalesced reads, many rows in flight). An
// invocation's loads wait on each other unit after unit, so on a real GPU the walk's length is
// what a small product costs whatever its bytes (an H200 took 28 us for SmolLM2's down product
// one unit at a time, 48 units a row; 10 us eight at a time); a large one (the output
// projection) has rows enough in flight with 8. A workgroup of 256 holds 256 / SPLIT rows and a
// tile of TILE tokens (pipeline constant: 1, 4 or 8): each weight quad is decoded once per
// tile. The SPLIT partial sums of a (row, token) meet in workgroup memory and one invocation
// adds them. matmul.wgsl is the other shape, for GPUs emulated on a CPU, where barriers are
// expensive.
//
// Batch invariance: a (row, token) value is the sum over an invocation's units of dot(quad, x),
// then the SPLIT partials added in invocation order, the same expression in every token slot of
// every TILE variant (SPLIT depends on the matrix alone): bit-identical whatever the block size
// M or the token's place in it.

// Prepended with matmul_io.wgsl (parameters, bindings) and one matmul_input*.wgsl (what the
// input is: as stored, RMS-normalized as it is read, or silu(gate) * up).

// Tokens per workgroup: 1, 4 or 8.
override TILE: u32 = 8u;
// Invocations per row: 8, 16, 32 or 64.
override SPLIT: u32 = 32u;

const WORKGROUP: u32 = 256u;

// [row in group, token slot, split]: the partial sums of each (row, token), 256 / SPLIT rows.
var<workgroup> partial: array<f32, 2048>;

// [token slot, split]: each token's sum of squares of its input, per invocation of a row
// (NORMED inputs; every row of the group computes the same sums, row 0 writes them).
var<workgroup> squares: array<f32, 512>;

@compute @workgroup_size(WORKGROUP)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = lid / SPLIT;
    let j = lid % SPLIT;
    let units_at_once = SPLIT / 8u;
    let o = (wid.x + wid.y * 65535u) * (WORKGROUP / SPLIT) + r;
    let t0 = wid.z * TILE;
    // Rows past the matrix decode its last row and are not stored (every invocation must
    // reach the barrier).
    let row = min(o, p.n - 1u) * p.row_bytes;
    var lo = vec4<f32>(0.0); // tokens t0..t0+4
    var hi = vec4<f32>(0.0); // tokens t0+4..t0+8
    var ss_lo = vec4<f32>(0.0); // their sums of squares (NORMED)
    var ss_hi = vec4<f32>(0.0);
    let units = p.k / 32u;
    for (var u = j / 8u; u < units; u += units_at_once) {
        let w = quad(unit_head(row, u), j % 8u);
        let b = u * 8u + j % 8u;
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
