//! A GGUF file of arbitrary bytes through parse, config, tensor checks, tokenizer and chat
//! template (see `runahead_fuzz_common::check_gguf`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: runahead_fuzz_common::report_stack_overflows(),
    |data: &[u8]| runahead_fuzz_common::check_gguf(data)
);
