// Attention of each block token over the KV cache and the block entries it may see (causal or
// tree mask), first half, shaped for real GPUs: one partial result per chunk of a (token, head)
// pair's slots (attention_io.wgsl), merged by attention_combine.wgsl; one workgroup of 64
// invocations per (token, head, chunk), which split the chunk's slots among them, so a decoding
// step's workgroups grow with the context. attention.wgsl is the other shape, one invocation
// per (token, head, chunk), for GPUs emulated on a CPU where barriers are expensive.
//
// Token t sees slots 0..base (the cache before this forward) followed by the block entries
// listed in visible[t] (in block order). Three passes over a chunk, each reduced in a fixed
// order:
// 1. scores: invocation i takes slots first + i, first + i + 64, ...; the maximum meets in a
//    fixed tree;
// 2. exponentials: the same slots; their sum meets in the same tree;
// 3. values: invocation i = g * HD/4 + d adds up vec4 d of the values of slots first + g,
//    first + g + G, ... (G = 64 / (HD/4) groups), and the G partial vectors are added in group
//    order.

// Prepended with attention_io.wgsl (parameters, bindings, HD, slots, chunks, passes 1 and 2).

const WG: u32 = 64u;

var<workgroup> red: array<f32, 64>;
var<workgroup> red4: array<vec4<f32>, 64>;

// red[0] = max (or sum) of red[0..64], in a fixed tree. Called in uniform control flow.
fn reduce(lid: u32, take_max: bool) -> f32 {
    workgroupBarrier();
    for (var r = WG / 2u; r > 0u; r >>= 1u) {
        if (lid < r) {
            red[lid] = select(red[lid] + red[lid + r], max(red[lid], red[lid + r]), take_max);
        }
        workgroupBarrier();
    }
    let v = red[0];
    // Nobody writes red again until everyone has read the result.
    workgroupBarrier();
    return v;
}

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    // x: exactly m * n_heads pairs; y: the block's chunks (a token that sees fewer slots has
    // nothing to do in its last ones, but still meets every barrier).
    let pr = pair_of(wid.x);
    let c = wid.y;
    let first = c * p.chunk;
    let end = min(first + p.chunk, pr.n_slots);

    // 1. Scores and their maximum.
    red[lid] = score_slots(pr, first + lid, end, WG);
    let mx = reduce(lid, true);

    // 2. Exponentials and their sum.
    red[lid] = exp_slots(pr, mx, first + lid, end, WG);
    let sum = reduce(lid, false);
    // Pass 3 reads exponentials other invocations wrote.
    storageBarrier();

    // 3. Values weighted by the exponentials (normalized when the chunks are merged).
    let hd4 = HD / 4u;
    let groups = WG / hd4;
    let g = lid / hd4;
    let d = lid % hd4;
    var acc = vec4<f32>(0.0);
    if (g < groups) {
        for (var k = first + g; k < end; k += groups) {
            acc += scores[pr.sb + k] * kv4(v_cache[kv_at(pr, k) + d]);
        }
    }
    red4[lid] = acc;
    workgroupBarrier();
    if (first >= pr.n_slots) {
        return;
    }
    let pb = partial_at(pr, c);
    if (g == 0u) {
        var o = red4[d];
        for (var i = 1u; i < groups; i++) {
            o += red4[i * hd4 + d];
        }
        partials[pb + 1u + d] = o;
    }
    if (lid == 0u) {
        partials[pb] = vec4<f32>(mx, sum, 0.0, 0.0);
    }
}
