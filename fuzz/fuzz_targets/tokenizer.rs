//! Arbitrary text and token ids through SmolLM2's real tokenizer, built once per process (see
//! `runahead_fuzz_common::check_tokenizer`).
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use runahead_fuzz_common::{open_model, FuzzTokenizer, SMOLLM2};
use runahead_model::Tokenizer;

static TOKENIZER: LazyLock<FuzzTokenizer> = LazyLock::new(|| {
    let meta = &open_model(SMOLLM2).header.metadata;
    FuzzTokenizer::new(Tokenizer::from_metadata(meta).expect("SmolLM2's tokenizer"))
});

fuzz_target!(
    init: {
        runahead_fuzz_common::report_stack_overflows();
        LazyLock::force(&TOKENIZER);
    },
    |data: &[u8]| runahead_fuzz_common::check_tokenizer(&TOKENIZER, data)
);
