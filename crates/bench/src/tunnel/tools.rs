//! The programs `bench tunnel` runs besides PostgreSQL's: `ip` and `tc`, socat, OpenSSH and
//! tpchgen-cli. scripts/bench-tools.sh installs them; it is compiled into this crate so that an
//! installed `pgcompress` can run it on a machine without a checkout.

use crate::error::{Error, IoContext, Result};
use crate::Progress;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// scripts/bench-tools.sh, run with bash when something it installs is missing.
const SCRIPT: &str = include_str!("../../../../scripts/bench-tools.sh");

/// The tpchgen-cli version the data is generated with (the script installs this one).
pub const TPCHGEN_VERSION: &str = "4.0.0";

/// Where the script installs tpchgen-cli: `$PGCOMPRESS_TOOLS`, or /opt/pgcompress-tools.
pub fn tools_dir() -> PathBuf {
    std::env::var_os("PGCOMPRESS_TOOLS")
        .map_or_else(|| PathBuf::from("/opt/pgcompress-tools"), PathBuf::from)
}

/// tpchgen-cli of [`TPCHGEN_VERSION`]: the one under [`tools_dir`], else the one on PATH.
pub fn tpchgen() -> Option<PathBuf> {
    let candidates = [
        Some(tools_dir().join("bin/tpchgen-cli")),
        pgtest::which("tpchgen-cli"),
    ];
    candidates.into_iter().flatten().find(|p| {
        Command::new(p)
            .arg("--version")
            .stderr(Stdio::null())
            .output()
            .is_ok_and(|o| {
                String::from_utf8_lossy(&o.stdout).trim()
                    == format!("tpchgen-cli {TPCHGEN_VERSION}")
            })
    })
}

/// Programs the bench runs that are not there.
fn missing() -> Vec<&'static str> {
    let mut m = Vec::new();
    for p in ["ip", "tc", "socat", "ssh", "ssh-keygen"] {
        if pgtest::which(p).is_none() {
            m.push(p);
        }
    }
    if !std::path::Path::new("/usr/sbin/sshd").exists() {
        m.push("sshd");
    }
    if tpchgen().is_none() {
        m.push("tpchgen-cli");
    }
    m
}

/// Makes sure every program is there, running scripts/bench-tools.sh (apt-get, pip) when
/// one is missing; returns tpchgen-cli.
pub fn ensure(p: &dyn Progress) -> Result<PathBuf> {
    let missing = missing();
    if !missing.is_empty() {
        p.step(format!(
            "installing {} with scripts/bench-tools.sh",
            missing.join(", ")
        ));
        let status = Command::new("bash")
            .args(["-c", SCRIPT, "bench-tools.sh"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .io(|| "running scripts/bench-tools.sh".into())?;
        if !status.success() {
            return Err(Error::Failed {
                what: "scripts/bench-tools.sh".into(),
                status,
                stderr: "see its messages above".into(),
            });
        }
    }
    tpchgen().ok_or_else(|| Error::Tunnel {
        what: format!("tpchgen-cli {TPCHGEN_VERSION}"),
        reason: format!(
            "not in {}/bin nor on PATH after scripts/bench-tools.sh",
            tools_dir().display()
        ),
    })
}
