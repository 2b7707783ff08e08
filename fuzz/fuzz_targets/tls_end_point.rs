//! Arbitrary bytes as the server's certificate that SCRAM channel binding hashes
//! (`tls-server-end-point`), and byte 0 as the answer to SSLRequest: an error or a hash of one
//! of the SHA-2 sizes, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use logical::conn::tls::{parse_answer, tls_server_end_point};

fuzz_target!(|data: &[u8]| {
    if let Some(&b) = data.first() {
        let _ = parse_answer(b);
    }
    if let Ok(hash) = tls_server_end_point(data) {
        assert!(matches!(hash.len(), 28 | 32 | 48 | 64), "{}", hash.len());
    }
});
