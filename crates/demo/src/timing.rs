//! Wall and CPU time of child processes, and the statistics the reports take of them.

use crate::error::{Error, IoContext, Result};
use serde::Serialize;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Wall and CPU (user + sys) seconds of one process, and the page faults it took, or the
/// median of several.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Timing {
    /// Elapsed seconds.
    pub wall: f64,
    /// User plus system CPU seconds.
    pub cpu: f64,
    /// Minor page faults: about one per 4 KiB page of fresh memory the process touched, which
    /// the kernel had to map and zero (a large share of the CPU of a short process that
    /// fills big buffers).
    pub faults: f64,
}

/// CPU seconds and minor page faults so far of this process's waited-for children.
fn children_usage() -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_CHILDREN).map_or((0.0, 0.0), |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        (
            t(u.user_time()) + t(u.system_time()),
            u.minor_page_faults() as f64,
        )
    })
}

/// The median of `v`; 0 when it is empty.
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Runs `cmd[0]` with the rest as arguments to completion, its output discarded, and times it. An exit
/// status above 1 is a failure (pg_waldump exits 1 when the WAL ends inside the last file).
pub fn measure(cmd: &[String]) -> Result<Timing> {
    let program = cmd
        .first()
        .ok_or(Error::Internal("an empty command line"))?;
    let (cpu0, faults0) = children_usage();
    let t = Instant::now();
    let status = Command::new(program)
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| Error::Spawn {
            what: cmd.join(" "),
            program: program.clone(),
            source,
        })?;
    let wall = t.elapsed().as_secs_f64();
    if status.code().is_none_or(|c| c > 1) {
        return Err(Error::Failed {
            what: cmd.join(" "),
            status,
            stderr: "its standard error was not kept; run the command by hand to see it".into(),
        });
    }
    let (cpu1, faults1) = children_usage();
    Ok(Timing {
        wall,
        cpu: cpu1 - cpu0,
        faults: faults1 - faults0,
    })
}

/// Runs `cmd` as the server user (when we are root), its standard output into `stdout` when given, and times
/// it, file creation included (the shell of an archive_command opens that file too). Fails on a non-zero exit
/// with the first line the program printed on stderr.
pub fn timed(mut cmd: Command, stdout: Option<&Path>, what: &str) -> Result<Timing> {
    pgcluster::run::as_server_user(&mut cmd)?;
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    let (cpu0, faults0) = children_usage();
    let began = Instant::now();
    match stdout {
        Some(p) => {
            let f = std::fs::File::create(p).io(|| format!("{what}: creating {}", p.display()))?;
            cmd.stdout(f);
        }
        None => {
            cmd.stdout(Stdio::null());
        }
    }
    let out = cmd.output().map_err(|source| Error::Spawn {
        what: what.to_string(),
        program: cmd.get_program().to_string_lossy().into_owned(),
        source,
    })?;
    let wall = began.elapsed().as_secs_f64();
    let (cpu1, faults1) = children_usage();
    let (cpu, faults) = (cpu1 - cpu0, faults1 - faults0);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::Failed {
            what: what.to_string(),
            status: out.status,
            stderr: err
                .lines()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("no message")
                .to_string(),
        });
    }
    Ok(Timing { wall, cpu, faults })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(Vec::new()), 0.0);
    }

    #[test]
    fn faults_count_the_fresh_memory_a_child_touches() {
        let dd = |bs: &str| -> Vec<String> {
            [
                "dd",
                "if=/dev/zero",
                "of=/dev/null",
                &format!("bs={bs}"),
                "count=1",
            ]
            .map(String::from)
            .to_vec()
        };
        let small = measure(&dd("4k")).expect("dd runs");
        let big = measure(&dd("64M")).expect("dd runs");
        // dd reads 64 MiB into one fresh buffer: a fault per 4 KiB page of it, unless the
        // kernel backs every allocation with huge pages (THP "always").
        assert!(big.faults > small.faults, "{big:?} {small:?}");
        let thp_always = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| s.contains("[always]"));
        if !thp_always {
            assert!(big.faults >= 16384.0, "{big:?}");
            assert!(small.faults < 2000.0, "{small:?}");
        }
    }
}
