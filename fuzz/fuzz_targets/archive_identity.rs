//! Arbitrary bytes as the repository's identity file, a segment's first page and
//! `pg_control`, which push, get and init read from outside: every malformed input is an
//! error, never a panic, and what parses writes back to the same identity.
#![no_main]

use archive::identity::{control_file_system_identifier, Identity};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for id in [Identity::parse(data), Identity::of_segment(data)]
        .into_iter()
        .flatten()
    {
        assert_eq!(Identity::parse(id.render().as_bytes()), Ok(id));
        assert_eq!(id.admits(&id), Ok(()));
    }
    let _ = control_file_system_identifier(data);
});
