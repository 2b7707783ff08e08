//! Every size flag takes the same units: bytes, or a number with kB, MB, GB or TB (powers of
//! 1024, as PostgreSQL's memory settings), in any case, with or without an `i`. clap checks a
//! value when it meets it, so `--help` after the flag shows whether the value was taken
//! without running anything. The lab's `pgcompress-bench spill --work-mem` takes the same parser
//! (`service::size`), checked in the bench crate's own tests.

use std::process::Command;

/// The size flags, as the command line that carries one.
const FLAGS: [&[&str]; 1] = [&["logical", "recv", "--work-mem"]];

fn status(flag: &[&str], value: &str) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pgcompress"))
        .args(flag)
        .arg(value)
        .arg("--help")
        .output()
        .expect("run pgcompress");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_size_flag_takes_the_same_units() {
    for flag in FLAGS {
        for good in [
            "1048576", "1024kB", "1024KB", "1024k", "1024KiB", "1MB", "1mb", "1M", "1MiB", "1GB",
            "1GiB", "1g", "1TB", "1TiB", "64MB",
        ] {
            let (code, err) = status(flag, good);
            assert_eq!(code, Some(0), "{flag:?} {good}: {err}");
        }
        for bad in ["1XB", "MB", "1.5MB", "", "99999999999TB"] {
            let (code, err) = status(flag, bad);
            assert_eq!(code, Some(2), "{flag:?} {bad:?}: {err}");
            assert!(
                err.starts_with("pgcompress: error: --work-mem: "),
                "{flag:?} {bad:?}: {err}"
            );
        }
    }
}
