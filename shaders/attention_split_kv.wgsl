// Attention of each block token over the KV cache and the block entries it may see (causal or
// tree mask), shaped for real GPUs: one workgroup of 64 invocations per (token, head), which
// split the visible slots among them. attention.wgsl is the other shape, one invocation per
// (token, head), for GPUs emulated on a CPU where barriers are expensive; on a real GPU that
// one leaves all but m * n_heads lanes idle and walks a long cache serially.
//
// Token t sees slots 0..base (the cache before this forward) followed by the block entries
// listed in visible[t] (in block order). Three passes, each reduced in a fixed order:
// 1. scores: invocation i takes slots i, i + 64, ...; the maximum meets in a fixed tree;
// 2. exponentials: the same slots; their sum meets in the same tree;
// 3. values: invocation i = g * HD/4 + d adds up vec4 d of the values of slots g, g + G, ...
//    (G = 64 / (HD/4) groups), and the G partial vectors are added in group order.
// Nothing depends on the other tokens of the block: a token's result is the same whether it
// arrives alone, in a causal block, or on a tree branch (batch-invariant).

// Prepended with attention_io.wgsl (parameters, bindings, HD, slots, passes 1 and 2).

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
    // Exactly m * n_heads workgroups: every one has a token.
    let pr = pair_of(wid.x);

    // 1. Scores and their maximum.
    red[lid] = score_slots(pr, lid, WG);
    let mx = reduce(lid, true);

    // 2. Exponentials and their sum.
    red[lid] = exp_slots(pr, mx, lid, WG);
    let inv = 1.0 / reduce(lid, false);
    // Pass 3 reads exponentials other invocations wrote.
    storageBarrier();

    // 3. Weighted sum of values.
    let hd4 = HD / 4u;
    let groups = WG / hd4;
    let g = lid / hd4;
    let d = lid % hd4;
    var acc = vec4<f32>(0.0);
    if (g < groups) {
        for (var k = g; k < pr.n_slots; k += groups) {
            acc += (scores[pr.sb + k] * inv) * kv4(v_cache[kv_at(pr, k) + d]);
        }
    }
    red4[lid] = acc;
    workgroupBarrier();
    if (g == 0u) {
        var o = red4[d];
        for (var i = 1u; i < groups; i++) {
            o += red4[i * hd4 + d];
        }
        out[pr.qb + d] = o;
    }
}
