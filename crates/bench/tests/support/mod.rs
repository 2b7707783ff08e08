//! What the tests of `pgcompress-bench` share: the binary, run beside the `pgcompress` it measures.

use std::path::Path;
use std::process::Command;

/// `pgcompress-bench`, with the `pgcompress` it measures beside it. Cargo builds only this package's
/// binaries for these tests, and cannot be asked to build `pgcompress` from inside them (the running
/// `cargo test` holds the target directory), so a missing one fails with what to run.
pub fn bench() -> Command {
    let exe = Path::new(env!("CARGO_BIN_EXE_pgcompress-bench"));
    let beside = exe.with_file_name("pgcompress");
    assert!(
        beside.is_file(),
        "no {}: build it first (cargo build -p cli, with the same profile and target directory; \
         cargo test --workspace builds it)",
        beside.display()
    );
    Command::new(exe)
}
