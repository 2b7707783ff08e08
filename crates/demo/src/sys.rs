//! Machine figures from /proc (proc(5)): load, CPU stolen by the host, the CPU model, and the CPU time of a
//! process tree. Clock ticks per second come from the system (`sysconf(_SC_CLK_TCK)`). Also the hash of a child
//! process's standard output.

use crate::error::{Error, IoContext, Result};
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

/// Clock ticks per second in which /proc reports CPU times; `None` if the system does not say.
pub fn ticks_per_second() -> Option<f64> {
    use nix::unistd::{sysconf, SysconfVar};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => Some(t as f64),
        _ => None,
    }
}

/// The one-minute load average, from /proc/loadavg.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The CPU model, from /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
}

/// The machine's CPU time counters, from the first line of /proc/stat (in clock ticks, every CPU together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuTimes {
    /// Ticks the host gave to other virtual machines while this one wanted to run.
    pub steal: u64,
    /// Ticks of every kind (user nice system idle iowait irq softirq steal), steal included.
    pub total: u64,
}

impl CpuTimes {
    /// The counters now.
    pub fn now() -> Option<CpuTimes> {
        CpuTimes::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// The counters in the text of /proc/stat.
    pub fn parse(text: &str) -> Option<CpuTimes> {
        let fields: Vec<u64> = text
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
        Some(CpuTimes {
            steal: *fields.get(7)?,
            total: fields.iter().take(8).sum(),
        })
    }
}

/// The share of the machine's CPU time that its host gave to other virtual machines ("steal") between
/// `start` and `end`: the figures were taken on a machine that much slower than it looked, and unevenly so.
/// `None` when a sample is missing, no time passed, or a counter went backwards (a reset).
pub fn steal_share(start: Option<&CpuTimes>, end: Option<&CpuTimes>) -> Option<f64> {
    let (start, end) = (start?, end?);
    let total = end.total.checked_sub(start.total).filter(|&t| t > 0)?;
    let steal = end.steal.checked_sub(start.steal)?;
    Some(steal as f64 / total as f64)
}

/// Cores, RAM, kernel and CPU model on one line.
pub fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ram_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
        .map_or("? GiB".into(), |kb| {
            format!("{:.0} GiB", kb as f64 / 1048576.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or("?".into(), |s| s.trim().to_string());
    format!(
        "{cores} cores, {ram_gib} RAM, Linux {kernel}, {}",
        cpu_model().unwrap_or_else(|| "CPU model unknown".into())
    )
}

/// A process's pid from the first line of a PostgreSQL data directory's `postmaster.pid`.
pub fn postmaster_pid(data_dir: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(data_dir.join("postmaster.pid")).ok()?;
    text.lines().next()?.trim().parse().ok()
}

/// CPU ticks of one process, from the text of `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    /// The parent's pid.
    pub ppid: u32,
    /// utime + stime: the process's own CPU ticks.
    pub own: u64,
    /// cutime + cstime: CPU ticks of its waited-for children.
    pub reaped: u64,
}

impl ProcStat {
    /// The figures of process `pid`.
    pub fn of(pid: u32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// The figures in the text of a `/proc/PID/stat` file.
    pub fn parse(text: &str) -> Option<ProcStat> {
        // The command name is in parentheses and may hold spaces; fields resume after the last ')'.
        let rest = &text[text.rfind(')')? + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
        Some(ProcStat {
            ppid: u32::try_from(n(1)?).ok()?,
            own: n(11)? + n(12)?,
            reaped: n(13)? + n(14)?,
        })
    }
}

/// CPU seconds a server has used: the postmaster's own and its reaped children's, plus every live child's.
/// Backends exit with their sessions, so a run's whole CPU (compression included) lands in here.
pub fn server_cpu_s(postmaster: u32) -> Option<f64> {
    let ticks = ticks_per_second()?;
    let p = ProcStat::of(postmaster)?;
    let mut total = p.own + p.reaped;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(s) = ProcStat::of(pid).filter(|s| s.ppid == postmaster) {
            total += s.own;
        }
    }
    Some(total as f64 / ticks)
}

/// Sends `sig` to `pid`; a process already gone is not an error.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    if let Ok(p) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), sig);
    }
}

/// The state letter of a process (`R`, `S`, `Z`, ...), `None` when it is gone.
fn state(pid: u32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// Running: present and not a zombie.
pub fn alive(pid: u32) -> bool {
    state(pid).is_some_and(|s| s != 'Z')
}

/// Present in /proc, zombies included.
pub fn present(pid: u32) -> bool {
    state(pid).is_some()
}

/// Every live descendant of `root`, deepest first (children before their parents).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut parent = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(s) = ProcStat::of(pid) {
                parent.push((pid, s.ppid));
            }
        }
    }
    let mut found = vec![root];
    let mut k = 0;
    while k < found.len() {
        let p = found[k];
        found.extend(parent.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        k += 1;
    }
    found.remove(0);
    found.reverse();
    found
}

/// CPU seconds of process `pid`: its own user and system time and that of the children it has waited
/// for (utime + stime + cutime + cstime of /proc/PID/stat). Clock ticks per second from the system, or 100.
pub fn cpu_seconds(pid: u32) -> std::io::Result<f64> {
    let s = ProcStat::of(pid).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("/proc/{pid}/stat is missing or unreadable"),
        )
    })?;
    Ok((s.own + s.reaped) as f64 / ticks_per_second().unwrap_or(100.0))
}

/// CPU seconds of `pid` and of every live descendant ([`cpu_seconds`] of each): a forking relay's CPU,
/// whether its connections have ended (their time is in the parent's cutime/cstime) or not.
pub fn tree_cpu_seconds(pid: u32) -> std::io::Result<f64> {
    let mut total = cpu_seconds(pid)?;
    for d in descendants(pid) {
        // A descendant that ended a moment ago is now in its parent's figures.
        total += cpu_seconds(d).unwrap_or(0.0);
    }
    Ok(total)
}

/// Runs `cmd` (`program`, named in errors) to its end, its standard input empty, and returns what it
/// printed; fails on a non-zero exit with the first lines of its standard error. `what` names the step.
pub fn checked_output(
    cmd: &mut Command,
    program: &str,
    what: &str,
) -> Result<std::process::Output> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn {
            what: what.into(),
            program: program.into(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stderr: Vec<&str> = stderr.trim().lines().take(3).collect();
        return Err(Error::Failed {
            what: what.into(),
            status: out.status,
            stderr: if stderr.is_empty() {
                "no message".into()
            } else {
                stderr.join(" / ")
            },
        });
    }
    Ok(out)
}

/// Runs `cmd` to its end, its standard input empty, and returns the byte count and SHA-256 (hex) of its
/// standard output, read as it comes; `what` names the step in errors. Fails on a non-zero exit with what it
/// printed on standard error.
pub fn hash_stdout(cmd: &mut Command, what: &str) -> Result<(u64, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| Error::Spawn {
            what: what.into(),
            program: cmd.get_program().to_string_lossy().into_owned(),
            source,
        })?;
    let mut stdout = child
        .stdout
        .take()
        .ok_or(Error::Internal("stdout not piped"))?;
    let mut hash = Sha256::new();
    let mut len = 0u64;
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = stdout
            .read(&mut buf)
            .io(|| format!("reading the output of {what}"))?;
        if n == 0 {
            break;
        }
        hash.update(&buf[..n]);
        len += n as u64;
    }
    let out = child
        .wait_with_output()
        .io(|| format!("waiting for {what}"))?;
    if !out.status.success() {
        return Err(Error::Failed {
            what: what.into(),
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok((len, hex::encode(hash.finalize())))
}

/// CPU ticks the machine spent working (user, nice, system, irq, softirq), from /proc/stat.
pub fn busy_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = text
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    Some(f.first()? + f.get(1)? + f.get(2)? + f.get(5)? + f.get(6)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    const STAT_A: &str = "cpu  100 5 50 800 10 1 2 32 7 0\ncpu0 50 2 25 400 5 0 1 16 3 0\nintr 1\n";
    const STAT_B: &str = "cpu  160 5 70 900 10 1 2 52 9 0\ncpu0 80 2 35 450 5 0 1 26 4 0\nintr 2\n";

    #[test]
    fn steal_share_of_two_known_samples() {
        let a = CpuTimes::parse(STAT_A).expect("parses");
        let b = CpuTimes::parse(STAT_B).expect("parses");
        // guest (7, 9) is already counted in user and stays out of the total.
        assert_eq!(
            a,
            CpuTimes {
                steal: 32,
                total: 1000
            }
        );
        assert_eq!(
            b,
            CpuTimes {
                steal: 52,
                total: 1200
            }
        );
        // 20 stolen ticks of 200.
        assert_eq!(steal_share(Some(&a), Some(&b)), Some(0.1));
        // Samples swapped: the counters went backwards, so no figure rather than a wrapped one.
        assert_eq!(steal_share(Some(&b), Some(&a)), None);
        // The total grew but steal fell (a reset): no figure either.
        let reset = CpuTimes {
            steal: 3,
            total: 1300,
        };
        assert_eq!(steal_share(Some(&b), Some(&reset)), None);
        // No time passed, or a sample missing.
        assert_eq!(steal_share(Some(&a), Some(&a)), None);
        assert_eq!(steal_share(None, Some(&a)), None);
        assert_eq!(CpuTimes::parse("cpu0 1 2 3\n"), None);
    }

    #[test]
    fn proc_stat_fields_after_a_name_with_spaces() {
        let text = "42 (post gres: x) S 7 42 42 0 -1 4194560 1 0 0 0 13 4 21 9 20 0 1 0 5 0 0\n";
        let s = ProcStat::parse(text).expect("parses");
        assert_eq!(
            s,
            ProcStat {
                ppid: 7,
                own: 17,
                reaped: 30
            }
        );
        let me = ProcStat::of(std::process::id()).expect("this process");
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
    }

    #[test]
    fn clock_ticks_come_from_the_system() {
        assert!(ticks_per_second().is_some_and(|t| t >= 1.0));
    }

    #[test]
    fn cpu_seconds_of_this_process_and_its_tree() {
        let me = std::process::id();
        // Burn a little CPU so the figure is above zero at 100 ticks per second.
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(60) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        assert_ne!(x, 1);
        let own = cpu_seconds(me).expect("own");
        assert!(own > 0.0, "{own}");
        let mut sleeper = Command::new("sleep").arg("5").spawn().expect("sleep");
        assert!(descendants(me).contains(&sleeper.id()));
        let tree = tree_cpu_seconds(me).expect("tree");
        assert!(tree >= own, "{tree} < {own}");
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        assert!(!descendants(me).contains(&sleeper.id()));
        assert!(cpu_seconds(u32::MAX).is_err());
    }
}
