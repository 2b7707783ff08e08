//! What the runs of `bench tunnel` are checked against (the reference, built over the Unix socket before
//! the runs) and how each workload's result is checked: hashes of what was read, a restored dump's
//! counts, pgbench's report, a base backup's verification.

use super::*;

/// Builds what the runs are checked against, over the Unix socket: loads the TPC-H database, dumps
/// it and hashes what the reading workloads read; creates pgbench's tables.
pub fn prepare(env: &Env<'_>, workloads: &[Workload], pgbench_scale: u32) -> Result<Reference> {
    let mut r = Reference::default();
    if workloads.iter().any(|w| w.uses_tpch()) {
        let data = env.data()?;
        env.fresh_db(TPCH_DB)?;
        env.sql(TPCH_DB, &tpch::ddl())?;
        let script = env.work.join("load.sql");
        std::fs::write(&script, tpch::load_script(data))
            .io(|| format!("writing {}", script.display()))?;
        let mut cmd = env.local_cmd("psql", TPCH_DB);
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&script);
        run(&mut cmd)?;
        env.sql(TPCH_DB, "VACUUM ANALYZE")?;
        let counts = env.sql(TPCH_DB, &tpch::count_sql())?;
        if let Some(bad) = tpch::compare_counts(data, &counts) {
            return Err(Error::Tunnel {
                what: "loading the TPC-H data over the Unix socket".into(),
                reason: bad,
            });
        }
    }
    if workloads.contains(&Workload::Restore) {
        let file = env.work.join("reference.pgdump");
        let mut cmd = env.local_cmd("pg_dump", TPCH_DB);
        cmd.arg("-Fc").arg("-f").arg(&file);
        run(&mut cmd)?;
        r.dump = Some(file);
    }
    if workloads.contains(&Workload::CopyOut) {
        let mut cmd = env.local_cmd("psql", TPCH_DB);
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", COPY_OUT]);
        r.copy_out = Some(hash_stdout(&mut cmd, "psql -c COPY lineitem TO STDOUT")?);
    }
    if workloads.contains(&Workload::Select) {
        let mut cmd = env.local_cmd("psql", TPCH_DB);
        select_args(&mut cmd);
        r.select = Some(hash_stdout(&mut cmd, "psql -c SELECT * FROM lineitem")?);
    }
    if workloads.iter().any(|w| w.uses_narrow()) {
        narrow::create(env)?;
        if workloads.contains(&Workload::NarrowCopy) {
            r.narrow_copy = Some(narrow::reference(env, narrow::NARROW_COPY)?);
        }
        if workloads.contains(&Workload::NarrowSelect) {
            r.narrow_select = Some(narrow::reference(env, narrow::NARROW_SELECT)?);
        }
    }
    if workloads.iter().any(|w| w.uses_pgbench()) {
        env.fresh_db(PGBENCH_DB)?;
        let mut cmd = env.local_cmd("pgbench", PGBENCH_DB);
        cmd.args(["-i", "-q", "-s"]).arg(pgbench_scale.to_string());
        run(&mut cmd)?;
    }
    Ok(r)
}

/// Runs a client program to its end; fails with what it printed when it fails.
pub(super) fn run(cmd: &mut Command) -> Result<Output> {
    Ok(pgtest::run::run_as_current_user(cmd, None, CLIENT_TIMEOUT)?)
}

/// The check of a hashed output against the reference's.
pub(super) fn compare_hash(got: (u64, String), want: Option<&(u64, String)>) -> Outcome {
    let check = match want {
        Some(w) if *w == got => format!("sha256 equal to the Unix socket's ({} MB)", got.0 >> 20),
        Some(w) => format!(
            "FAILED: {} bytes, sha256 {}, against {} bytes, {}",
            got.0, got.1, w.0, w.1
        ),
        None => "FAILED: no reference".into(),
    };
    Outcome {
        check,
        ..Outcome::default()
    }
}

/// `pg_restore -l` of a dump lists the eight tables' data.
pub(super) fn dump_check(install: &PgInstall, file: &Path) -> Result<String> {
    let bytes = std::fs::metadata(file)
        .io(|| format!("reading {}", file.display()))?
        .len();
    let mut cmd = Command::new(install.bin("pg_restore"));
    cmd.arg("-l").arg(file);
    let out = run(&mut cmd)?;
    let list = String::from_utf8_lossy(&out.stdout);
    let missing: Vec<&str> = tpch::TABLES
        .iter()
        .map(|(t, _)| *t)
        .filter(|t| {
            !list
                .lines()
                .any(|l| l.contains("TABLE DATA") && l.split_whitespace().any(|w| w == *t))
        })
        .collect();
    Ok(if missing.is_empty() {
        format!(
            "pg_restore -l lists the 8 tables' data ({} MB)",
            bytes >> 20
        )
    } else {
        format!("FAILED: no data in the dump for {}", missing.join(", "))
    })
}

/// TPS, average latency and the check from pgbench's report.
pub fn pgbench_outcome(stdout: &str) -> Outcome {
    let after = |prefix: &str| {
        stdout.lines().find_map(|l| {
            l.trim()
                .strip_prefix(prefix)?
                .split_whitespace()
                .next()?
                .parse::<f64>()
                .ok()
        })
    };
    let tps = after("tps =");
    let latency_ms = after("latency average =");
    let done = after("number of transactions actually processed:");
    let failed = after("number of failed transactions:").unwrap_or(0.0);
    let check = match (done, tps) {
        (Some(n), Some(_)) if n > 0.0 && failed == 0.0 => {
            format!("pgbench: {n} transactions, none failed")
        }
        _ => format!("FAILED: pgbench reported {done:?} transactions, {failed} failed"),
    };
    Outcome {
        tps,
        latency_ms,
        check,
        zstd1_bytes: None,
    }
}

/// Bytes of the files under `dir`.
pub(super) fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}
