//! The workloads of `bench tunnel`, each run by a client program in the client namespace against one
//! endpoint (PostgreSQL's veth address, or the local end of a relay), with its untimed preparation
//! and check around the timed part.

mod check;
mod narrow;

use check::{compare_hash, dir_bytes, dump_check, run};
pub use check::{pgbench_outcome, prepare};
pub use narrow::{NarrowReference, NARROW_DB, NARROW_ROWS};

use super::tpch::{self, Data};
use crate::error::{Error, IoContext, Result};
use crate::sys::hash_stdout;
use pgtest::PgInstall;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// How long one client program may run (a GB-sized workload on a 50 Mbit/s link takes minutes).
const CLIENT_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// Rows psql fetches at a time for the `select` workload (`FETCH_COUNT`): bounded memory in psql.
pub const FETCH_COUNT: u32 = 50_000;

/// The database holding the TPC-H data every reading workload reads.
pub const TPCH_DB: &str = "tpch";
/// The database of pgbench's tables.
pub const PGBENCH_DB: &str = "pgbench";
/// The database the load workload fills, created empty before each run and dropped after.
const LOAD_DB: &str = "tpch_load";
/// The database pg_restore fills, created empty before each run and dropped after.
const RESTORE_DB: &str = "tpch_restore";

/// One workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// COPY FROM STDIN of the eight TPC-H tables (psql `\copy`, one connection).
    Load,
    /// `pg_dump -Fc` of the TPC-H database to a file beside the client.
    Dump,
    /// `pg_restore -j 2` of a dump of the TPC-H database into an empty database.
    Restore,
    /// `COPY lineitem TO STDOUT` through psql.
    CopyOut,
    /// `SELECT * FROM lineitem` through psql.
    Select,
    /// `COPY narrow TO STDOUT` of 400,000 rows of about 40 bytes, through psql.
    NarrowCopy,
    /// `SELECT * FROM narrow` through psql.
    NarrowSelect,
    /// `pgbench -S`, 8 clients, a fixed time.
    PgbenchS,
    /// pgbench's tpcb-like transactions, 8 clients, a fixed time.
    Tpcb,
    /// `pg_basebackup -X stream` of the cluster.
    Basebackup,
}

/// Every workload, in the order a run takes them.
pub const ALL: [Workload; 10] = [
    Workload::Load,
    Workload::Dump,
    Workload::Restore,
    Workload::CopyOut,
    Workload::Select,
    Workload::NarrowCopy,
    Workload::NarrowSelect,
    Workload::PgbenchS,
    Workload::Tpcb,
    Workload::Basebackup,
];

impl Workload {
    /// Its name in reports and in `--workloads`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Load => "load",
            Workload::Dump => "dump",
            Workload::Restore => "restore",
            Workload::CopyOut => "copy-out",
            Workload::Select => "select",
            Workload::NarrowCopy => "narrow-copy",
            Workload::NarrowSelect => "narrow-select",
            Workload::PgbenchS => "pgbench-S",
            Workload::Tpcb => "tpcb",
            Workload::Basebackup => "basebackup",
        }
    }

    /// True for the workloads that read or write the TPC-H data.
    pub fn uses_tpch(self) -> bool {
        !matches!(
            self,
            Workload::PgbenchS | Workload::Tpcb | Workload::NarrowCopy | Workload::NarrowSelect
        )
    }

    /// True for the workloads that read the narrow table.
    pub fn uses_narrow(self) -> bool {
        matches!(self, Workload::NarrowCopy | Workload::NarrowSelect)
    }

    /// True for pgbench's workloads.
    pub fn uses_pgbench(self) -> bool {
        matches!(self, Workload::PgbenchS | Workload::Tpcb)
    }
}

/// Parses `--workloads`: names separated by commas, `all` for every one; kept in [`ALL`]'s order.
pub fn select(list: &str) -> Result<Vec<Workload>> {
    let mut chosen = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if name == "all" {
            chosen.extend(ALL);
            continue;
        }
        let w = ALL
            .into_iter()
            .find(|w| w.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| Error::UnknownWorkload {
                name: name.into(),
                choices: ALL.map(|w| w.name()).join(", "),
            })?;
        chosen.push(w);
    }
    let chosen: Vec<Workload> = ALL.into_iter().filter(|w| chosen.contains(w)).collect();
    if chosen.is_empty() {
        return Err(Error::UnknownWorkload {
            name: list.into(),
            choices: ALL.map(|w| w.name()).join(", "),
        });
    }
    Ok(chosen)
}

/// Where PostgreSQL is, how to start a program beside the clients, and what the runs compare with.
pub struct Env<'a> {
    /// The PostgreSQL installation whose client programs run.
    pub install: &'a PgInstall,
    /// The server's Unix socket directory: the untimed work (preparation, checks) goes through it.
    pub socket_dir: PathBuf,
    /// The server's port.
    pub port: u16,
    /// Starts a program in the client namespace.
    pub client: &'a dyn Fn(&OsStr) -> Command,
    /// The TPC-H files.
    pub data: Option<&'a Data>,
    /// A directory for dumps and base backups.
    pub work: PathBuf,
    /// What the runs are checked against, made over the Unix socket before any run.
    pub reference: &'a Reference,
    /// pgbench's `-T`.
    pub pgbench_seconds: u32,
}

/// What every configuration's result must equal, read over the Unix socket before the runs.
#[derive(Clone, Debug, Default)]
pub struct Reference {
    /// `pg_dump -Fc` of the TPC-H database, for the restore workload.
    pub dump: Option<PathBuf>,
    /// Bytes and SHA-256 of `COPY lineitem TO STDOUT`.
    pub copy_out: Option<(u64, String)>,
    /// Bytes and SHA-256 of the `SELECT` through psql.
    pub select: Option<(u64, String)>,
    /// The narrow table's `COPY TO`, with its whole-output `zstd -1` size.
    pub narrow_copy: Option<NarrowReference>,
    /// The narrow table's `SELECT *`, with its whole-output `zstd -1` size.
    pub narrow_select: Option<NarrowReference>,
}

/// Where a client connects.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Host (an address).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Connect with PostgreSQL's own TLS (`sslmode=require`); otherwise in the clear.
    pub tls: bool,
}

/// What the timed part of a run gave, and how it was checked.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Transactions per second (pgbench).
    pub tps: Option<f64>,
    /// Average latency, ms (pgbench).
    pub latency_ms: Option<f64>,
    /// How the result was checked; starts with `FAILED` when it did not match.
    pub check: String,
    /// Bytes the whole output makes compressed by `zstd -1` (the narrow workloads).
    pub zstd1_bytes: Option<u64>,
}

/// Starts and stops the measurement around a run's timed part.
pub trait Meter {
    /// Takes the "before" sample.
    fn start(&mut self) -> Result<()>;
    /// Takes the "after" sample.
    fn stop(&mut self) -> Result<()>;
}

/// `COPY lineitem TO STDOUT`.
const COPY_OUT: &str = "COPY lineitem TO STDOUT";
/// The large SELECT.
const SELECT: &str = "SELECT * FROM lineitem";

/// Removes the `PG*` variables this process has from `cmd` and points it at `db` on `ep`.
fn connect(cmd: &mut Command, ep: &Endpoint, db: &str) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("PG") {
            cmd.env_remove(key);
        }
    }
    cmd.env("PGHOST", &ep.host)
        .env("PGPORT", ep.port.to_string())
        .env("PGUSER", pgtest::SUPERUSER)
        .env("PGDATABASE", db)
        .env("PGSSLMODE", if ep.tls { "require" } else { "disable" })
        .env("PGGSSENCMODE", "disable")
        .env("PGCONNECT_TIMEOUT", "30");
}

impl Env<'_> {
    /// `program` of the installation in the client namespace, connecting to `db` on `ep`.
    fn client_cmd(&self, program: &str, ep: &Endpoint, db: &str) -> Command {
        let mut cmd = (self.client)(self.install.bin(program).as_os_str());
        connect(&mut cmd, ep, db);
        cmd
    }

    /// The Unix socket endpoint (the host is the socket directory).
    fn local(&self) -> Endpoint {
        Endpoint {
            host: self.socket_dir.to_string_lossy().into_owned(),
            port: self.port,
            tls: false,
        }
    }

    /// `program` in this namespace, as this user, over the Unix socket: untimed work.
    pub fn local_cmd(&self, program: &str, db: &str) -> Command {
        let mut cmd = Command::new(self.install.bin(program));
        connect(&mut cmd, &self.local(), db);
        cmd
    }

    /// Runs an SQL script over the Unix socket in `db`; returns the rows (`-At`).
    pub fn sql(&self, db: &str, sql: &str) -> Result<String> {
        let mut cmd = self.local_cmd("psql", db);
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-At", "-f", "-"]);
        let out = pgtest::run::run_as_current_user(&mut cmd, Some(sql.as_bytes()), CLIENT_TIMEOUT)?;
        Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
    }

    /// A fresh empty database `db`.
    fn fresh_db(&self, db: &str) -> Result<()> {
        self.sql(
            "postgres",
            &format!("DROP DATABASE IF EXISTS {db};\nCREATE DATABASE {db};"),
        )
        .map(drop)
    }

    fn data(&self) -> Result<&Data> {
        self.data.ok_or(Error::Internal(
            "a TPC-H workload ran without the TPC-H data",
        ))
    }

    /// Runs `w` against `ep`: preparation, `meter` around the timed part, check.
    pub fn run(
        &self,
        w: Workload,
        ep: &Endpoint,
        tag: &str,
        meter: &mut dyn Meter,
    ) -> Result<Outcome> {
        match w {
            Workload::Load => self.load(ep, meter),
            Workload::Dump => self.dump(ep, tag, meter),
            Workload::Restore => self.restore(ep, meter),
            Workload::CopyOut => {
                let mut cmd = self.client_cmd("psql", ep, TPCH_DB);
                cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-c", COPY_OUT]);
                meter.start()?;
                let got = hash_stdout(&mut cmd, "psql -c COPY lineitem TO STDOUT")?;
                meter.stop()?;
                Ok(compare_hash(got, self.reference.copy_out.as_ref()))
            }
            Workload::Select => {
                let mut cmd = self.client_cmd("psql", ep, TPCH_DB);
                select_args(&mut cmd);
                meter.start()?;
                let got = hash_stdout(&mut cmd, "psql -c SELECT * FROM lineitem")?;
                meter.stop()?;
                Ok(compare_hash(got, self.reference.select.as_ref()))
            }
            Workload::NarrowCopy | Workload::NarrowSelect => {
                let (sql, want) = if w == Workload::NarrowCopy {
                    (narrow::NARROW_COPY, self.reference.narrow_copy.as_ref())
                } else {
                    (narrow::NARROW_SELECT, self.reference.narrow_select.as_ref())
                };
                let mut cmd = self.client_cmd("psql", ep, NARROW_DB);
                narrow::args(&mut cmd, sql);
                meter.start()?;
                let got = hash_stdout(&mut cmd, &format!("psql -c {sql}"))?;
                meter.stop()?;
                Ok(Outcome {
                    zstd1_bytes: want.map(|r| r.zstd1_bytes),
                    ..compare_hash(got, want.map(|r| &r.hash))
                })
            }
            Workload::PgbenchS | Workload::Tpcb => self.pgbench(w, ep, meter),
            Workload::Basebackup => self.basebackup(ep, tag, meter),
        }
    }

    fn load(&self, ep: &Endpoint, meter: &mut dyn Meter) -> Result<Outcome> {
        let data = self.data()?;
        self.fresh_db(LOAD_DB)?;
        self.sql(LOAD_DB, &tpch::ddl())?;
        let script = self.work.join("load.sql");
        std::fs::write(&script, tpch::load_script(data))
            .io(|| format!("writing {}", script.display()))?;
        let mut cmd = self.client_cmd("psql", ep, LOAD_DB);
        cmd.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-f"])
            .arg(&script);
        meter.start()?;
        run(&mut cmd)?;
        meter.stop()?;
        self.counts_then_drop(LOAD_DB, data)
    }

    fn dump(&self, ep: &Endpoint, tag: &str, meter: &mut dyn Meter) -> Result<Outcome> {
        let file = self.work.join(format!("dump-{tag}.pgdump"));
        let mut cmd = self.client_cmd("pg_dump", ep, TPCH_DB);
        cmd.arg("-Fc").arg("-f").arg(&file);
        meter.start()?;
        run(&mut cmd)?;
        meter.stop()?;
        let check = dump_check(self.install, &file)?;
        std::fs::remove_file(&file).io(|| format!("deleting {}", file.display()))?;
        Ok(Outcome {
            check,
            ..Outcome::default()
        })
    }

    fn restore(&self, ep: &Endpoint, meter: &mut dyn Meter) -> Result<Outcome> {
        let data = self.data()?;
        let dump = self
            .reference
            .dump
            .as_ref()
            .ok_or(Error::Internal("restore without a reference dump"))?;
        self.fresh_db(RESTORE_DB)?;
        let mut cmd = self.client_cmd("pg_restore", ep, RESTORE_DB);
        cmd.args(["-j", "2", "--no-owner", "-d", RESTORE_DB])
            .arg(dump);
        meter.start()?;
        run(&mut cmd)?;
        meter.stop()?;
        self.counts_then_drop(RESTORE_DB, data)
    }

    /// Counts the rows of the TPC-H tables in `db`, drops `db`, and checks the counts against `data`.
    fn counts_then_drop(&self, db: &str, data: &Data) -> Result<Outcome> {
        let counts = self.sql(db, &tpch::count_sql())?;
        self.sql("postgres", &format!("DROP DATABASE {db}"))?;
        Ok(Outcome {
            check: match tpch::compare_counts(data, &counts) {
                None => format!(
                    "row counts equal ({} rows)",
                    data.rows.values().sum::<u64>()
                ),
                Some(bad) => format!("FAILED: {bad}"),
            },
            ..Outcome::default()
        })
    }

    fn pgbench(&self, w: Workload, ep: &Endpoint, meter: &mut dyn Meter) -> Result<Outcome> {
        let mut cmd = self.client_cmd("pgbench", ep, PGBENCH_DB);
        // -n: no VACUUM before the run, so every configuration starts the same way.
        cmd.args(["-n", "-c", "8", "-j", "2", "-T"])
            .arg(self.pgbench_seconds.to_string());
        if w == Workload::PgbenchS {
            cmd.arg("-S");
        }
        meter.start()?;
        let out = run(&mut cmd)?;
        meter.stop()?;
        Ok(pgbench_outcome(&String::from_utf8_lossy(&out.stdout)))
    }

    fn basebackup(&self, ep: &Endpoint, tag: &str, meter: &mut dyn Meter) -> Result<Outcome> {
        let dir = self.work.join(format!("basebackup-{tag}"));
        if dir.exists() {
            std::fs::remove_dir_all(&dir).io(|| format!("deleting {}", dir.display()))?;
        }
        let mut cmd = self.client_cmd("pg_basebackup", ep, "postgres");
        cmd.args(["-X", "stream", "-c", "fast", "--no-sync", "-D"])
            .arg(&dir);
        meter.start()?;
        run(&mut cmd)?;
        meter.stop()?;
        let bytes = dir_bytes(&dir);
        let verify = self.install.bin("pg_verifybackup");
        let check = if verify.exists() {
            let out = Command::new(&verify)
                .arg(&dir)
                .stdin(Stdio::null())
                .output()
                .io(|| format!("running {}", verify.display()))?;
            if out.status.success() {
                format!("pg_verifybackup ok ({} MB)", bytes >> 20)
            } else {
                format!(
                    "FAILED: pg_verifybackup: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )
            }
        } else if bytes > 0 {
            format!("{} MB written (no pg_verifybackup)", bytes >> 20)
        } else {
            "FAILED: nothing written".into()
        };
        std::fs::remove_dir_all(&dir).io(|| format!("deleting {}", dir.display()))?;
        Ok(Outcome {
            check,
            ..Outcome::default()
        })
    }
}

/// psql arguments of the SELECT workload (and of its reference).
fn select_args(cmd: &mut Command) {
    cmd.args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-v"])
        .arg(format!("FETCH_COUNT={FETCH_COUNT}"))
        .args(["-c", SELECT]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_parse_in_run_order() {
        let w = select("select, load").expect("parses");
        assert_eq!(w, vec![Workload::Load, Workload::Select]);
        assert_eq!(select("all").expect("parses").len(), 10);
        assert_eq!(
            select("narrow-select,narrow-copy").expect("parses"),
            vec![Workload::NarrowCopy, Workload::NarrowSelect]
        );
        assert!(select("nope").is_err());
        assert!(select("").is_err());
    }

    #[test]
    fn pgbench_report_is_read() {
        let out = "transaction type: <builtin: select only>\nscaling factor: 8\n\
                   number of transactions actually processed: 12345\n\
                   number of failed transactions: 0 (0.000%)\n\
                   latency average = 6.479 ms\n\
                   initial connection time = 12.345 ms\n\
                   tps = 1234.567890 (without initial connection time)\n";
        let o = pgbench_outcome(out);
        assert_eq!(o.tps, Some(1234.56789));
        assert_eq!(o.latency_ms, Some(6.479));
        assert_eq!(o.check, "pgbench: 12345 transactions, none failed");
        let bad = pgbench_outcome("number of transactions actually processed: 10\nnumber of failed transactions: 2 (1%)\ntps = 3\n");
        assert!(bad.check.starts_with("FAILED"), "{}", bad.check);
    }
}
