//! What the tests of `pgcompress-bench` share: the binary, run beside the `pgcompress` it measures.

use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;

/// `pgcompress-bench`, with `pgcompress` built beside it: the bench runs the product binary next to
/// itself, and Cargo builds only this package's binaries for these tests.
pub fn bench() -> Command {
    static BUILT: OnceLock<()> = OnceLock::new();
    let exe = Path::new(env!("CARGO_BIN_EXE_pgcompress-bench"));
    BUILT.get_or_init(|| build_pgcompress_beside(exe));
    Command::new(exe)
}

/// Builds `pgcompress` into the directory that holds `exe`, with the same target directory and profile.
fn build_pgcompress_beside(exe: &Path) {
    let dir = exe.parent().expect("the binary's directory");
    let target = dir.parent().expect("the target directory");
    let profile = dir.file_name().and_then(|n| n.to_str()).expect("profile");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args([
            "build",
            "--quiet",
            "-p",
            "cli",
            "--bin",
            "pgcompress",
            "--profile",
        ])
        .arg(if profile == "debug" { "dev" } else { profile })
        .arg("--target-dir")
        .arg(target)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "building pgcompress beside {} failed: {}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.join("pgcompress").is_file(),
        "no pgcompress in {}",
        dir.display()
    );
}
