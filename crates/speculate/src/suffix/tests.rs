use super::*;

#[test]
fn counts_substrings_and_keeps_invariants() {
    let mut t = SuffixTrie::default();
    t.insert(&[1, 2, 1, 2, 3]);
    t.check();
    let dump = t.dump();
    let count = |s: &[u32]| dump.iter().find(|(p, _)| p == s).map_or(0, |x| x.1);
    assert_eq!(count(&[1, 2]), 2);
    assert_eq!(count(&[2, 1, 2]), 1);
    assert_eq!(count(&[1]), 2);
    assert_eq!(count(&[3]), 1);
    assert_eq!(count(&[2, 2]), 0);
}

#[test]
fn removing_a_sequence_restores_the_trie() {
    let a = [5u32, 6, 7, 5, 6, 8];
    let b = [6u32, 7, 9, 6, 7];
    let mut t = SuffixTrie::default();
    t.insert(&b);
    let only_b = t.dump();
    let nodes = t.len();
    t.insert(&a);
    t.check();
    t.remove(&a);
    t.check();
    assert_eq!(t.dump(), only_b);
    assert_eq!(t.len(), nodes, "freed nodes are returned");
    t.remove(&b);
    assert!(t.is_empty());
}

#[test]
fn incremental_index_equals_bulk_insert() {
    let seq: Vec<u32> = (0..200).map(|i| (i * 7 + i / 13) % 11).collect();
    let mut r = RequestIndex::default();
    r.sync(&seq[..50]);
    r.sync(&seq);
    r.trie.check();
    let mut bulk = SuffixTrie::default();
    bulk.insert(&seq);
    assert_eq!(r.trie.dump(), bulk.dump());
    // A different sequence rebuilds.
    r.sync(&[3, 4, 3]);
    assert_eq!(r.seq, vec![3, 4, 3]);
}

#[test]
fn proposes_frequent_continuations_as_a_tree() {
    let mut d = SuffixDrafter::new(1000);
    // After "1 2": 3 twice, 4 once. The context ends in "1 2".
    let ctx = [1, 2, 3, 9, 1, 2, 3, 8, 1, 2, 4, 7, 1, 2];
    let draft = d.draft(&ctx, 8);
    let roots: Vec<u32> = draft.children(None).map(|c| draft.tokens[c]).collect();
    assert_eq!(roots[0], 3, "most frequent first");
    assert!(
        roots.contains(&4),
        "the alternative is a sibling: {roots:?}"
    );
    let i3 = draft.tokens.iter().position(|&t| t == 3).unwrap();
    assert!((draft.confidence[i3] - 2.0 / 3.0).abs() < 1e-6);
    // Draft depth is bounded by the match length times the factor.
    assert!(draft.max_depth() <= 4);
    assert!(d.draft(&[1, 2, 3], 8).is_empty(), "no repeat, no draft");
}

#[test]
fn global_index_helps_later_requests_and_evicts_oldest() {
    let mut d = SuffixDrafter::new(10);
    let first = [100u32, 101, 102, 103, 104, 105];
    d.finish(1, &first); // output: 101..=105
    assert_eq!(d.global_tokens(), 5);
    let draft = d.draft(&[7, 101, 102], 4);
    assert_eq!(
        draft.tokens,
        vec![103, 104, 105],
        "continues an earlier output"
    );
    d.finish(0, &[1, 2, 3, 4, 5, 6]);
    assert_eq!(d.global_tokens(), 6, "the first output was evicted");
    assert!(d.draft(&[7, 101, 102], 4).is_empty());
    d.global.trie.check();
}

#[test]
fn each_level_of_a_draft_earns_trust_at_its_own_length() {
    let mut d = SuffixDrafter::new(1000);
    d.depth_per_match = 8.0;
    // "9" was followed by 1 2 3 4 5: a one-token match, its chain five deep.
    let context = [9, 1, 2, 3, 4, 5, 6, 9];
    for _ in 0..40 {
        let draft = d.draft(&context, 5);
        assert_eq!(draft.tokens, [1, 2, 3, 4, 5]);
        d.observe(&draft, &[0, 1]); // two accepted, the third rejected, every time
    }
    // Lengths 1 and 2 (the match, then one node down) kept their trust; length 3 lost it;
    // deeper levels were never judged.
    assert!(d.trust.ratio(1) > 0.95 && d.trust.ratio(2) > 0.95);
    assert!(d.trust.ratio(3) < 0.05, "{}", d.trust.ratio(3));
    assert_eq!(d.trust.ratio(4), 1.0);
    let c = d.draft(&context, 5).confidence;
    assert!(c[0] > 0.95 && c[1] > 0.95 && c[2] <= 0.05, "{c:?}");
}

#[test]
fn short_matches_that_fail_lose_trust_and_long_ones_keep_it() {
    let mut d = SuffixDrafter::new(1000);
    // "5" was followed by 6 once: a one-token match, frequency 1.
    let short = [5, 6, 1, 2, 3, 4, 7, 8, 9, 5];
    // "1 2 3 4" was followed by 7: a four-token match, frequency 1.
    let long = [5, 6, 1, 2, 3, 4, 7, 8, 9, 1, 2, 3, 4];
    let first = d.draft(&short, 1);
    assert_eq!(first.confidence, vec![1.0], "nothing learned yet");
    for _ in 0..30 {
        let draft = d.draft(&short, 1);
        d.observe(&draft, &[]); // rejected every time
        let draft = d.draft(&long, 1);
        d.observe(&draft, &[0]); // accepted every time
    }
    let short_conf = d.draft(&short, 1).confidence[0];
    assert!(short_conf < 0.1, "{short_conf}");
    assert!(d.draft(&long, 1).confidence[0] > 0.95);
    // A shadow judgement without a draft of its own changes nothing.
    let before = d.trust.clone();
    d.last = None;
    d.observe(&Draft::chain("suffix", &[1], 1.0), &[0]);
    assert_eq!(d.trust, before);
}
