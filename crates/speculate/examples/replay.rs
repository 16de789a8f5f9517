//! Replays model-free drafters against a target's real greedy outputs, without the model: the
//! traces `runahead bench --suites ... --traces FILE` writes (each prompt's ids, its plain
//! output, the cost of a forward of 1..=16 rows behind two contexts).
//!
//! Each step runs what `generate_with` runs around the forward: the drafter proposes from the
//! prompt and the output so far, adaptive depth keeps the best nodes for the cost at that
//! context, and the draft is "verified" against the known output (greedy acceptance: the
//! longest path of the tree the output follows), then the drafter and the controller learn
//! from it. The forward's time is the cost model's, so the speedup it prints is what the
//! drafter and the depth policy would give with drafting free and timing noiseless: a way to
//! compare drafters in seconds where the bench takes minutes and a noisy machine.
//!
//!   cargo run --release -p runahead-speculate --example replay -- traces.json [ngram,suffix,auto]
//!
//! With `REPLAY_ORACLE=1` each step verifies only the path that will be accepted: an upper
//! bound for the depth policy with these drafts. `REPLAY_EXTRA_ROWS=0.6` prices every row past
//! the first at 0.6 times its measured cost (what cheaper verification would buy).
//! `REPLAY_CALIBRATION=1` prints, for the input-grounded suites, how often the drafter's nodes
//! were accepted against the path confidence it gave them, for the nodes adaptive depth kept
//! and for those it dropped. `REPLAY_PRICE=FILE` prices the steps with another cost (what a
//! policy planning with a wrong model loses; `REPLAY_PLAN_PRICED=1` plans with it too,
//! `REPLAY_PLAN_KNOTS=1,2,4,8,16` with its seconds at those block sizes only).
//! `REPLAY_COVERAGE=1` prints, for the input-grounded suites, where
//! each output token stood among the continuations the context so far offers (what any
//! drafter over the context's own n-grams could propose), before the replays.

use std::collections::BTreeMap;

use runahead_speculate::{
    observe_unverified, AutoDrafter, CostModel, Depth, DepthController, Draft, DraftRequest,
    Drafter, NgramDrafter, SamplingParams, StepRecord, SuffixDrafter, MAX_DRAFT,
};

struct Trace {
    suite: String,
    kind: String,
    prompt: Vec<u32>,
    output: Vec<u32>,
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_u64())
                .map(|x| x as u32)
                .collect()
        })
        .unwrap_or_default()
}

/// The traces and cost in `path`; with `knots`, the cost from those block sizes' seconds only
/// (the rest interpolated, as a calibration timing those sizes would give).
fn load(path: &str, knots: Option<&[usize]>) -> Result<(CostModel, Vec<Trace>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON: {e}"))?;
    let curve = |i: usize| -> Option<(usize, Vec<(usize, f64)>)> {
        let c = v["cost"].get(i)?;
        let context = c.get(0)?.as_u64()? as usize;
        let seconds = c.get(1)?.as_array()?;
        let samples = seconds
            .iter()
            .enumerate()
            .filter_map(|(r, s)| Some((r + 1, s.as_f64()?)))
            .filter(|(r, _)| knots.is_none_or(|k| k.contains(r)))
            .collect();
        Some((context, samples))
    };
    let cost = match (curve(0), curve(1)) {
        (Some((near, a)), Some((far, b))) => CostModel::from_two_contexts(near, &a, far, &b),
        _ => {
            return Err(format!(
                "{path}: no cost (a run with --depth auto writes it)"
            ))
        }
    };
    let traces = v["prompts"]
        .as_array()
        .ok_or(format!("{path}: no prompts"))?
        .iter()
        .map(|p| Trace {
            suite: p["suite"].as_str().unwrap_or("").to_owned(),
            kind: p["kind"].as_str().unwrap_or("").to_owned(),
            prompt: ids(&p["prompt"]),
            output: ids(&p["output"]),
        })
        .collect();
    Ok((cost, traces))
}

/// Nodes by path confidence (tenths), kept or dropped by the plan: confidence summed,
/// accepted, count.
#[derive(Default)]
struct Calibration {
    bins: [[(f64, f64, f64); 10]; 2], // [kept, dropped][tenth]
}

impl Calibration {
    /// Every node of `draft`, ranked as [`Draft::truncate_to_best`] ranks them (the first
    /// `keep` kept), against `path`, the nodes the output follows.
    fn add(&mut self, draft: &Draft, keep: usize, path: &[usize]) {
        let confidence = draft.path_confidence();
        let mut order: Vec<usize> = (0..draft.len()).collect();
        order.sort_by(|&a, &b| confidence[b].total_cmp(&confidence[a]).then(a.cmp(&b)));
        for (rank, &node) in order.iter().enumerate() {
            let c = confidence[node] as f64;
            let bin = &mut self.bins[usize::from(rank >= keep)][((c * 10.0) as usize).min(9)];
            bin.0 += c;
            bin.1 += f64::from(u8::from(path.contains(&node)));
            bin.2 += 1.0;
        }
    }

    fn print(&self, name: &str) {
        for (bins, what) in self.bins.iter().zip(["kept", "dropped"]) {
            for (tenth, &(confidence, accepted, count)) in bins.iter().enumerate() {
                if count > 0.0 {
                    println!(
                        "{name:>7} {what:>7} {:.1}-{:.1}: confidence {:.3}, accepted {:.3} ({count} nodes)",
                        tenth as f64 / 10.0,
                        (tenth + 1) as f64 / 10.0,
                        confidence / count,
                        accepted / count,
                    );
                }
            }
        }
    }
}

/// The longest path of `draft` that `want` begins with (greedy verification's outcome).
fn accepted(draft: &Draft, want: &[u32]) -> Vec<usize> {
    let mut path = Vec::new();
    let mut node = None;
    while let Some(&t) = want.get(path.len()) {
        match draft.children(node).find(|&c| draft.tokens[c] == t) {
            Some(c) => {
                path.push(c);
                node = Some(c);
            }
            None => break,
        }
    }
    path
}

/// Seconds of plain decoding and of speculative decoding for one trace, and forwards: each
/// step priced by `price`, planned by `depth`'s own cost model.
fn replay(
    price: &CostModel,
    oracle: bool,
    drafter: &mut dyn Drafter,
    depth: &mut Depth,
    t: &Trace,
    mut calibration: Option<&mut Calibration>,
) -> (f64, f64, usize) {
    let sampling = SamplingParams::greedy();
    let mut controller = DepthController::new(depth.clone());
    let Some(&first) = t.output.first() else {
        return (0.0, 0.0, 0);
    };
    let mut history = t.prompt.clone();
    history.push(first);
    let (mut plain, mut spec, mut forwards) = (0.0, 0.0, 0);
    let mut at = 1; // output tokens emitted
    while at < t.output.len() {
        // The cache holds everything but the last emitted token.
        let base = history.len() - 1;
        plain += price.at(base).seconds(1);
        controller.at_context(base);
        let room = (t.output.len() - at - 1).min(MAX_DRAFT);
        let mut draft = Draft::empty(drafter.name());
        if room > 0 {
            let budget = controller.budget(drafter.name(), false, 0.7, room);
            if budget > 0 {
                let request = DraftRequest {
                    context: &history,
                    max_nodes: budget,
                    sampling: &sampling,
                    cost: controller.cost(),
                };
                draft = pollster::block_on(drafter.propose(request)).unwrap_or(draft);
                draft.truncate_to_best(room);
            }
        }
        let proposed = draft.len();
        let mut plan = controller.plan(&draft);
        if let Some(c) = calibration.as_deref_mut() {
            c.add(&draft, plan.keep, &accepted(&draft, &t.output[at..]));
        }
        if oracle {
            // The best any depth policy could do with this draft: verify just the path that
            // will be accepted, when it pays.
            let path = accepted(&draft, &t.output[at..]);
            let curve = price.at(base);
            let keep = (0..=path.len())
                .max_by(|&a, &b| {
                    let rate = |k: usize| (k + 1) as f64 / curve.seconds(k + 1);
                    rate(a).total_cmp(&rate(b))
                })
                .unwrap_or(0);
            let mut kept = vec![false; draft.len()];
            path[..keep].iter().for_each(|&n| kept[n] = true);
            draft.retain(&kept);
            plan.keep = draft.len();
        }
        let want = &t.output[at..];
        let (expected, accepted_len) = if plan.keep == 0 && !draft.is_empty() {
            // Not verified: judged on its first tokens, as generate_with does.
            let source = draft.source;
            let unverified = std::mem::replace(&mut draft, Draft::empty(source));
            observe_unverified(drafter, unverified, want[0])
        } else {
            draft.truncate_to_best(plan.keep);
            let path = accepted(&draft, want);
            if !draft.is_empty() {
                drafter.observe(&draft, &path);
            }
            (plan.expected, path.len())
        };
        let rows = draft.len() + 1;
        let seconds = price.at(base).seconds(rows);
        spec += seconds;
        forwards += 1;
        controller.record(StepRecord {
            source: draft.source,
            expected,
            accepted: accepted_len,
            proposed,
            draft_seconds: 0.0,
            verify_rows: rows,
            verify_seconds: seconds,
            context: base,
        });
        // The accepted tokens (none when the draft was only judged) and the target's own next.
        let verified = if draft.is_empty() { 0 } else { accepted_len };
        let emitted = (verified + 1).min(t.output.len() - at);
        history.extend_from_slice(&t.output[at..at + emitted]);
        // Plain decoding pays one forward per emitted token at its context.
        for k in 1..emitted {
            plain += price.at(base + k).seconds(1);
        }
        at += emitted;
    }
    drafter.finish(t.prompt.len(), &history);
    *depth = controller.into_depth();
    (plain, spec, forwards)
}

/// Where each output token stands among the continuations of the context before it, in the
/// input-grounded traces: the most frequent continuation of the longest suffix of the context
/// seen earlier in it (at most [`COVERAGE_LONGEST`] tokens), another continuation of that
/// suffix, a continuation of a shorter suffix, none at all, or missed.
fn coverage(traces: &[Trace]) {
    const COVERAGE_LONGEST: usize = 24;
    let names = [
        "longest's most frequent",
        "longest's other",
        "a shorter one's",
        "no match",
        "missed",
    ];
    let mut counts = [0usize; 5];
    for t in traces.iter().filter(|t| t.kind == "grounded") {
        let Some(&first) = t.output.first() else {
            continue;
        };
        let mut history = t.prompt.clone();
        history.push(first);
        for &next in &t.output[1..] {
            // Continuations of each suffix length that occurs earlier, longest first.
            let n = history.len();
            let mut by_length: Vec<BTreeMap<u32, usize>> = Vec::new();
            for len in (1..=COVERAGE_LONGEST.min(n - 1)).rev() {
                let suffix = &history[n - len..];
                let mut continuations = BTreeMap::new();
                for start in 0..n - len {
                    if &history[start..start + len] == suffix {
                        *continuations.entry(history[start + len]).or_insert(0) += 1;
                    }
                }
                if !continuations.is_empty() {
                    by_length.push(continuations);
                }
            }
            let most =
                |c: &BTreeMap<u32, usize>| c.iter().max_by_key(|&(_, &k)| k).map(|(&t, _)| t);
            let class = match by_length.split_first() {
                None => 3,
                Some((longest, _)) if most(longest) == Some(next) => 0,
                Some((longest, _)) if longest.contains_key(&next) => 1,
                Some((_, shorter)) if shorter.iter().any(|c| c.contains_key(&next)) => 2,
                Some(_) => 4,
            };
            counts[class] += 1;
            history.push(next);
        }
    }
    let total = counts.iter().sum::<usize>().max(1);
    for (name, count) in names.iter().zip(counts) {
        println!(
            "coverage: {name:>23}: {count} tokens ({:.1}%)",
            100.0 * count as f64 / total as f64
        );
    }
}

fn make(name: &str) -> Option<Box<dyn Drafter>> {
    Some(match name {
        "ngram" => Box::new(NgramDrafter::default()),
        "suffix" => Box::new(SuffixDrafter::default()),
        "auto" => Box::new(AutoDrafter::new(SuffixDrafter::default(), None)),
        _ => return None,
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: replay TRACES.json [ngram,suffix,auto]");
        std::process::exit(2);
    };
    let (mut cost, traces) = load(path, None).unwrap_or_else(|e| {
        eprintln!("replay: {e}");
        std::process::exit(1);
    });
    let names = args.get(2).map_or("suffix", String::as_str);
    // REPLAY_ORACLE=1: each step verifies exactly the path that will be accepted (when that
    // pays): the most any depth policy could make of the drafter's drafts.
    let oracle = std::env::var("REPLAY_ORACLE").is_ok_and(|v| v == "1");
    let want_calibration = std::env::var("REPLAY_CALIBRATION").is_ok_and(|v| v == "1");
    if std::env::var("REPLAY_COVERAGE").is_ok_and(|v| v == "1") {
        coverage(&traces);
    }
    if let Some(scale) = std::env::var("REPLAY_EXTRA_ROWS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
    {
        cost = cost.with_extra_rows_scaled(scale);
    }
    // REPLAY_PRICE=FILE: price the steps with that file's cost (a JSON object with "cost" as
    // the traces have it: say, forward_cost's timings) while the policy plans with the traces'
    // own model; REPLAY_PLAN_PRICED=1: the policy plans with that cost too.
    let price = match std::env::var("REPLAY_PRICE") {
        Ok(file) => load(&file, None).map(|(c, _)| c).unwrap_or_else(|e| {
            eprintln!("replay: {e}");
            std::process::exit(1);
        }),
        Err(_) => cost.clone(),
    };
    if std::env::var("REPLAY_PLAN_PRICED").is_ok_and(|v| v == "1") {
        cost = price.clone();
    }
    // REPLAY_PLAN_KNOTS=1,2,4,8,16: the policy plans with REPLAY_PRICE's cost at those block
    // sizes only (what a calibration timing them would know).
    if let (Ok(file), Ok(knots)) = (
        std::env::var("REPLAY_PRICE"),
        std::env::var("REPLAY_PLAN_KNOTS"),
    ) {
        let knots: Vec<usize> = knots.split(',').filter_map(|k| k.parse().ok()).collect();
        cost = load(&file, Some(&knots))
            .map(|(c, _)| c)
            .unwrap_or_else(|e| {
                eprintln!("replay: {e}");
                std::process::exit(1);
            });
    }
    for name in names.split(',') {
        let Some(mut drafter) = make(name) else {
            eprintln!("replay: unknown drafter {name} (ngram, suffix, auto)");
            std::process::exit(2);
        };
        let mut depth = Depth::adaptive(cost.clone());
        // Per suite: plain seconds, speculative seconds, tokens, forwards.
        let mut suites: BTreeMap<(String, String), (f64, f64, usize, usize)> = BTreeMap::new();
        let mut calibration = Calibration::default();
        for t in &traces {
            let c = (want_calibration && t.kind == "grounded").then_some(&mut calibration);
            let (plain, spec, forwards) =
                replay(&price, oracle, drafter.as_mut(), &mut depth, t, c);
            let s = suites.entry((t.kind.clone(), t.suite.clone())).or_default();
            s.0 += plain;
            s.1 += spec;
            s.2 += t.output.len();
            s.3 += forwards;
        }
        if want_calibration {
            calibration.print(name);
        }
        let (mut p_all, mut s_all) = (0.0, 0.0);
        for ((kind, _), (plain, spec, _, _)) in &suites {
            if kind == "grounded" {
                p_all += plain;
                s_all += spec;
            }
        }
        println!(
            "{name:>7} grounded: {:.2}x over all tokens",
            p_all / s_all.max(1e-12)
        );
        let mut by_kind: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        for ((kind, suite), (plain, spec, tokens, forwards)) in &suites {
            let speedup = plain / spec.max(1e-12);
            by_kind.entry(kind).or_default().push(speedup);
            println!(
                "{name:>7} {suite:>16} ({kind}): {speedup:.2}x, {:.2} tokens per forward",
                *tokens as f64 / (*forwards).max(1) as f64
            );
        }
        for (kind, speedups) in by_kind {
            let geomean = speedups.iter().map(|s| s.ln()).sum::<f64>() / speedups.len() as f64;
            println!(
                "{name:>7} {kind}: geometric mean {:.2}x over {} suites",
                geomean.exp(),
                speedups.len()
            );
        }
    }
}
