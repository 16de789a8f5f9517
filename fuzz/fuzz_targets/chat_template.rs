//! An arbitrary chat template rendered over arbitrary messages (see
//! `runahead_fuzz_common::check_chat` for the input format).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: runahead_fuzz_common::report_stack_overflows(),
    |data: &[u8]| runahead_fuzz_common::check_chat(data)
);
