// y[t, col0 + o] (+)= sum_k W[o, k] * x[t, k]: a quantized weight matrix times a block of
// activation rows. Prepended with formats/common.wgsl and one formats/*.wgsl, which define
// `unit_head` and `quad`: weights 4i..4i+4 of unit u (32 weights) of a row.
//
// One invocation computes ROWS consecutive output rows for TILE tokens (pipeline constants;
// TILE is 1, 4 or 8, chosen from the block size). What this shape is for: on CPU-emulated GPUs
// (lavapipe, SwiftShader) every load costs a loop over the SIMD lanes, so loads, not
// arithmetic, set the speed. Each weight quad is loaded and decoded once for TILE tokens, and
// each activation vec4 once for ROWS rows. Accumulators are vec4 (one component per token) in
// separate variables, never an array indexed at run time (that spills to memory). No shared
// memory and no barriers.
//
// Batch invariance: every (row, token) value is reduced in an order fixed by the row length
// alone (acc += dot(q[i], x[i]) + dot(q[i+1], x[i+1]) for i = 0, 2, .. over the row), the same
// expression in every token slot of every TILE variant, so a token's result is bit-identical
// whatever the block size M or its place in the block.

// Prepended with matmul_io.wgsl (parameters, bindings) and one matmul_input*.wgsl (what the
// input is: as stored, RMS-normalized as it is read, or silu(gate) * up).

// Tokens per invocation: 1, 4 or 8.
override TILE: u32 = 8u;
// Output rows per invocation: 1, 2, 4, 8 or 16; invocations per workgroup.
override ROWS: u32 = 8u;
override WG: u32 = 16u;

// Quads i and i + 1 of the activations of four tokens (zero for slots past the block).
struct X4 {
    a0: vec4<f32>,
    a1: vec4<f32>,
    a2: vec4<f32>,
    a3: vec4<f32>,
    b0: vec4<f32>,
    b1: vec4<f32>,
    b2: vec4<f32>,
    b3: vec4<f32>,
}

// Tokens t..t+4 (t + 3 only when TILE >= 4), vec4 index b within a row of the input.
fn load_x4(t: u32, b: u32) -> X4 {
    var r: X4;
    r.a0 = x_at(t, b);
    r.b0 = x_at(t, b + 1u);
    if (TILE >= 4u) {
        r.a1 = x_at(t + 1u, b);
        r.b1 = x_at(t + 1u, b + 1u);
        r.a2 = x_at(t + 2u, b);
        r.b2 = x_at(t + 2u, b + 1u);
        r.a3 = x_at(t + 3u, b);
        r.b3 = x_at(t + 3u, b + 1u);
    }
    return r;
}

// The quads as the product multiplies them (x_weighted).
fn weigh4(xs: X4, b: u32) -> X4 {
    var r = xs;
    r.a0 = x_weighted(xs.a0, b);
    r.b0 = x_weighted(xs.b0, b + 1u);
    if (TILE >= 4u) {
        r.a1 = x_weighted(xs.a1, b);
        r.b1 = x_weighted(xs.b1, b + 1u);
        r.a2 = x_weighted(xs.a2, b);
        r.b2 = x_weighted(xs.b2, b + 1u);
        r.a3 = x_weighted(xs.a3, b);
        r.b3 = x_weighted(xs.b3, b + 1u);
    }
    return r;
}

// The quads squared element by element (their dot with ones is the sum of squares).
fn square4(xs: X4) -> X4 {
    return X4(
        xs.a0 * xs.a0, xs.a1 * xs.a1, xs.a2 * xs.a2, xs.a3 * xs.a3,
        xs.b0 * xs.b0, xs.b1 * xs.b1, xs.b2 * xs.b2, xs.b3 * xs.b3,
    );
}

// acc + (dot(qa, xa_t) + dot(qb, xb_t)) for the four tokens of xs.
fn step4(acc: vec4<f32>, qa: vec4<f32>, qb: vec4<f32>, xs: X4) -> vec4<f32> {
    if (TILE == 1u) {
        return vec4<f32>(acc.x + (dot(qa, xs.a0) + dot(qb, xs.b0)), 0.0, 0.0, 0.0);
    }
    return acc + vec4<f32>(
        dot(qa, xs.a0) + dot(qb, xs.b0),
        dot(qa, xs.a1) + dot(qb, xs.b1),
        dot(qa, xs.a2) + dot(qb, xs.b2),
        dot(qa, xs.a3) + dot(qb, xs.b3),
    );
}

// Accumulators of one row: tokens t0..t0+4 and t0+4..t0+8.
struct Acc {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

// One quad pair (i, i + 1) of unit head h of a row, for all tokens of the tile.
fn row_step(acc: Acc, h: Head, i: u32, lo: X4, hi: X4) -> Acc {
    let qa = quad(h, i);
    let qb = quad(h, i + 1u);
    var r = acc;
    r.lo = step4(acc.lo, qa, qb, lo);
    if (TILE >= 8u) {
        r.hi = step4(acc.hi, qa, qb, hi);
    }
    return r;
}

fn store(t: u32, o: u32, acc: f32, ss: f32) {
    if (t < step.m && o < p.n) {
        let i = t * p.y_stride + p.col0 + o;
        let v = finish(acc, ss);
        y[i] = select(v, y[i] + v, p.accumulate == 1u);
    }
}

// Row o's values for the tile's tokens; ss: each token's sum of squares (NORMED inputs).
fn store_row(t0: u32, o: u32, acc: Acc, ss: Acc) {
    store(t0, o, acc.lo.x, ss.lo.x);
    if (TILE >= 4u) {
        store(t0 + 1u, o, acc.lo.y, ss.lo.y);
        store(t0 + 2u, o, acc.lo.z, ss.lo.z);
        store(t0 + 3u, o, acc.lo.w, ss.lo.w);
    }
    if (TILE >= 8u) {
        store(t0 + 4u, o, acc.hi.x, ss.hi.x);
        store(t0 + 5u, o, acc.hi.y, ss.hi.y);
        store(t0 + 6u, o, acc.hi.z, ss.hi.z);
        store(t0 + 7u, o, acc.hi.w, ss.hi.w);
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wid: vec3<u32>) {
    let o = (gid.x + gid.y * 65535u * WG) * ROWS;
    if (o >= p.n) {
        return;
    }
    let t0 = wid.z * TILE;
    // Rows past the matrix decode its last row and are not stored.
    let last = p.n - 1u;
    let r0 = o * p.row_bytes;
    let r1 = min(o + 1u, last) * p.row_bytes;
    let r2 = min(o + 2u, last) * p.row_bytes;
    let r3 = min(o + 3u, last) * p.row_bytes;
    let r4 = min(o + 4u, last) * p.row_bytes;
    let r5 = min(o + 5u, last) * p.row_bytes;
    let r6 = min(o + 6u, last) * p.row_bytes;
    let r7 = min(o + 7u, last) * p.row_bytes;
    let r8 = min(o + 8u, last) * p.row_bytes;
    let r9 = min(o + 9u, last) * p.row_bytes;
    let r10 = min(o + 10u, last) * p.row_bytes;
    let r11 = min(o + 11u, last) * p.row_bytes;
    let r12 = min(o + 12u, last) * p.row_bytes;
    let r13 = min(o + 13u, last) * p.row_bytes;
    let r14 = min(o + 14u, last) * p.row_bytes;
    let r15 = min(o + 15u, last) * p.row_bytes;
    var a0: Acc;
    var a1: Acc;
    var a2: Acc;
    var a3: Acc;
    var a4: Acc;
    var a5: Acc;
    var a6: Acc;
    var a7: Acc;
    var a8: Acc;
    var a9: Acc;
    var a10: Acc;
    var a11: Acc;
    var a12: Acc;
    var a13: Acc;
    var a14: Acc;
    var a15: Acc;
    // Each token's sum of squares of its input, in the same fixed order for every token slot.
    var ss: Acc;
    let units = p.k / 32u;
    for (var u = 0u; u < units; u++) {
        let h0 = unit_head(r0, u);
        let h1 = unit_head(r1, u);
        let h2 = unit_head(r2, u);
        let h3 = unit_head(r3, u);
        let h4 = unit_head(r4, u);
        let h5 = unit_head(r5, u);
        let h6 = unit_head(r6, u);
        let h7 = unit_head(r7, u);
        let h8 = unit_head(r8, u);
        let h9 = unit_head(r9, u);
        let h10 = unit_head(r10, u);
        let h11 = unit_head(r11, u);
        let h12 = unit_head(r12, u);
        let h13 = unit_head(r13, u);
        let h14 = unit_head(r14, u);
        let h15 = unit_head(r15, u);
        for (var i = 0u; i < 8u; i += 2u) {
            let b = u * 8u + i;
            var lo = load_x4(t0, b);
            var hi: X4;
            if (TILE >= 8u) {
                hi = load_x4(t0 + 4u, b);
            }
            if (NORMED) {
                ss.lo = step4(ss.lo, vec4<f32>(1.0), vec4<f32>(1.0), square4(lo));
                if (TILE >= 8u) {
                    ss.hi = step4(ss.hi, vec4<f32>(1.0), vec4<f32>(1.0), square4(hi));
                }
                lo = weigh4(lo, b);
                if (TILE >= 8u) {
                    hi = weigh4(hi, b);
                }
            }
            a0 = row_step(a0, h0, i, lo, hi);
            if (ROWS >= 2u) {
                a1 = row_step(a1, h1, i, lo, hi);
            }
            if (ROWS >= 4u) {
                a2 = row_step(a2, h2, i, lo, hi);
                a3 = row_step(a3, h3, i, lo, hi);
            }
            if (ROWS >= 8u) {
                a4 = row_step(a4, h4, i, lo, hi);
                a5 = row_step(a5, h5, i, lo, hi);
                a6 = row_step(a6, h6, i, lo, hi);
                a7 = row_step(a7, h7, i, lo, hi);
            }
            if (ROWS >= 16u) {
                a8 = row_step(a8, h8, i, lo, hi);
                a9 = row_step(a9, h9, i, lo, hi);
                a10 = row_step(a10, h10, i, lo, hi);
                a11 = row_step(a11, h11, i, lo, hi);
                a12 = row_step(a12, h12, i, lo, hi);
                a13 = row_step(a13, h13, i, lo, hi);
                a14 = row_step(a14, h14, i, lo, hi);
                a15 = row_step(a15, h15, i, lo, hi);
            }
        }
    }
    store_row(t0, o, a0, ss);
    if (ROWS >= 2u) {
        store_row(t0, o + 1u, a1, ss);
    }
    if (ROWS >= 4u) {
        store_row(t0, o + 2u, a2, ss);
        store_row(t0, o + 3u, a3, ss);
    }
    if (ROWS >= 8u) {
        store_row(t0, o + 4u, a4, ss);
        store_row(t0, o + 5u, a5, ss);
        store_row(t0, o + 6u, a6, ss);
        store_row(t0, o + 7u, a7, ss);
    }
    if (ROWS >= 16u) {
        store_row(t0, o + 8u, a8, ss);
        store_row(t0, o + 9u, a9, ss);
        store_row(t0, o + 10u, a10, ss);
        store_row(t0, o + 11u, a11, ss);
        store_row(t0, o + 12u, a12, ss);
        store_row(t0, o + 13u, a13, ss);
        store_row(t0, o + 14u, a14, ss);
        store_row(t0, o + 15u, a15, ss);
    }
}
