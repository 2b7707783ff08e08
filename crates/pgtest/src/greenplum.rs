//! The UPDATE workloads of the Greenplum / pgsql-hackers `wal_compression` studies, plus pgbench tpcb-like.
//!
//! The studies (the 2014-2015 "compression of full-page writes" threads, and Greenplum's re-run of them)
//! named each workload after the table's shape and what the UPDATE changed. Here "short" is a 10-character
//! text, "long" a 1,000-character text and "tiny" a `smallint`. Every table also has an `id int` column
//! (no index). Data comes from `generate_series` and `md5`, so the same scale gives byte-identical rows.
//!
//! A workload is a setup (CREATE TABLE + INSERT, then `VACUUM FREEZE` so pages start all-visible and
//! hinted, run once in a template database) and a run (one UPDATE of every row, or a seeded single-client
//! pgbench). Tables are filled to 100 %, so every UPDATE moves the row to a new page and the old page is
//! written as a full-page image the first time after a checkpoint: at scale 1 each run writes about 5-8 MB
//! of images.

/// What a workload runs in its template database once, before any run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setup {
    /// An SQL script.
    Sql(String),
    /// `pgbench -i -s scale`.
    PgbenchInit {
        /// pgbench scale (100,000 accounts per unit).
        scale: u32,
    },
}

/// What one measured run executes in a fresh copy of the template database.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Run {
    /// An SQL script that updates `rows` rows.
    Sql {
        /// The script.
        sql: String,
        /// Rows it updates, for rows per second.
        rows: u64,
    },
    /// `pgbench -n -c 1 -t transactions --random-seed=PGBENCH_SEED`: one client, so the run is the same each time.
    Pgbench {
        /// Transactions to run.
        transactions: u32,
    },
}

/// One workload at one scale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    /// Its name in the studies.
    pub name: &'static str,
    /// Run once in the template database.
    pub setup: Setup,
    /// Run once per setting in a copy of it.
    pub run: Run,
}

/// The names, in the order the studies printed them, then pgbench.
pub const NAMES: [&str; 10] = [
    NINE_SHORT_ONE_LONG,
    HUNDRED_ALL,
    HUNDRED_HALF,
    HUNDRED_NULLED,
    SHORT_LONG_NO_CHANGE,
    TEN_ALL,
    TWO_BOTH,
    TWO_NONE,
    TWO_ONE,
    PGBENCH,
];

/// Nine short texts and one long text; the UPDATE changes the nine short ones.
pub const NINE_SHORT_ONE_LONG: &str = "9 short and 1 long, short changed";
/// A hundred smallints; the UPDATE changes all of them.
pub const HUNDRED_ALL: &str = "hundred tiny fields, all changed";
/// A hundred smallints; the UPDATE changes the first fifty.
pub const HUNDRED_HALF: &str = "hundred tiny fields, half changed";
/// A hundred smallints; the UPDATE sets the first fifty to NULL.
pub const HUNDRED_NULLED: &str = "hundred tiny fields, half nulled";
/// One short and one long text; the UPDATE writes them back unchanged.
pub const SHORT_LONG_NO_CHANGE: &str = "one short and one long field, no change";
/// Ten smallints; the UPDATE changes all of them.
pub const TEN_ALL: &str = "ten tiny fields, all changed";
/// Two short texts; the UPDATE changes both.
pub const TWO_BOTH: &str = "two short fields, both changed";
/// Two short texts; the UPDATE writes them back unchanged.
pub const TWO_NONE: &str = "two short fields, no change";
/// Two short texts; the UPDATE changes one.
pub const TWO_ONE: &str = "two short fields, one changed";
/// pgbench's built-in TPC-B-like script.
pub const PGBENCH: &str = "pgbench tpcb-like";

/// The table every SQL workload creates.
pub const TABLE: &str = "gp_wal";

/// A 10-character text that differs per row and per column `k`.
fn short(k: u32) -> String {
    format!("substr(md5(i::text || '/{k}'), 1, 10)")
}

/// A 1,000-character text: 31 md5 digests of the row number and a 8-character tail.
fn long() -> String {
    "repeat(md5(i::text), 31) || substr(md5(i::text || 'tail'), 1, 8)".into()
}

/// A smallint below 1,000 that differs per row and per column `k`: small counters and codes, as such columns
/// hold in practice (values spread over the whole range would leave pglz nothing to find).
fn tiny(k: u32) -> String {
    format!("((i * {m} + {k}) % 1000)::smallint", m = 7 + 2 * k)
}

/// `CREATE TABLE` + `INSERT` of `rows` rows with the given columns (name, type, value expression).
fn setup_sql(rows: u64, cols: &[(String, &str, String)]) -> String {
    let defs: Vec<String> = cols.iter().map(|(n, t, _)| format!("{n} {t}")).collect();
    let values: Vec<&str> = cols.iter().map(|(_, _, v)| v.as_str()).collect();
    format!(
        "CREATE TABLE {TABLE} (id int, {defs}) WITH (autovacuum_enabled = off);\n\
         INSERT INTO {TABLE} SELECT i, {values} FROM generate_series(1, {rows}) AS i;\n\
         VACUUM (FREEZE, ANALYZE) {TABLE};\n",
        defs = defs.join(", "),
        values = values.join(", "),
    )
}

fn update(rows: u64, set: &str) -> Run {
    Run::Sql {
        sql: format!("UPDATE {TABLE} SET {set};\n"),
        rows,
    }
}

fn shorts(n: u32) -> Vec<(String, &'static str, String)> {
    (1..=n)
        .map(|k| (format!("s{k}"), "text", short(k)))
        .collect()
}

fn tinies(n: u32) -> Vec<(String, &'static str, String)> {
    (1..=n)
        .map(|k| (format!("t{k}"), "smallint", tiny(k)))
        .collect()
}

/// `cN = expr(cN)` for columns `prefix1..=prefixN`.
fn assign(prefix: &str, n: u32, expr: impl Fn(&str) -> String) -> String {
    (1..=n)
        .map(|k| {
            let c = format!("{prefix}{k}");
            format!("{c} = {}", expr(&c))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The workload called `name` at `scale` (rows and transactions are multiplied by it), or `None`.
pub fn workload(name: &str, scale: u32) -> Option<Workload> {
    let s = u64::from(scale.max(1));
    let changed_text = |c: &str| format!("upper({c})");
    let changed_tiny = |c: &str| format!("(({c} + 1) % 1000)::smallint");
    let (setup, run) = match name {
        NINE_SHORT_ONE_LONG => {
            let rows = 5_000 * s;
            let mut cols = shorts(9);
            cols.push(("l1".into(), "text", long()));
            (
                setup_sql(rows, &cols),
                update(rows, &assign("s", 9, changed_text)),
            )
        }
        HUNDRED_ALL | HUNDRED_HALF | HUNDRED_NULLED => {
            let rows = 25_000 * s;
            let set = match name {
                HUNDRED_ALL => assign("t", 100, changed_tiny),
                HUNDRED_HALF => assign("t", 50, changed_tiny),
                _ => assign("t", 50, |_| "NULL".into()),
            };
            (setup_sql(rows, &tinies(100)), update(rows, &set))
        }
        SHORT_LONG_NO_CHANGE => {
            let rows = 5_000 * s;
            let cols = vec![
                ("s1".into(), "text", short(1)),
                ("l1".into(), "text", long()),
            ];
            (setup_sql(rows, &cols), update(rows, "s1 = s1, l1 = l1"))
        }
        TEN_ALL => {
            let rows = 80_000 * s;
            (
                setup_sql(rows, &tinies(10)),
                update(rows, &assign("t", 10, changed_tiny)),
            )
        }
        TWO_BOTH | TWO_NONE | TWO_ONE => {
            let rows = 100_000 * s;
            let set = match name {
                TWO_BOTH => assign("s", 2, changed_text),
                TWO_NONE => assign("s", 2, |c| c.to_string()),
                _ => assign("s", 1, changed_text),
            };
            (setup_sql(rows, &shorts(2)), update(rows, &set))
        }
        PGBENCH => {
            return Some(Workload {
                name: PGBENCH,
                setup: Setup::PgbenchInit {
                    scale: scale.max(1),
                },
                run: Run::Pgbench {
                    transactions: 2_000 * scale.max(1),
                },
            })
        }
        _ => return None,
    };
    let name = NAMES.into_iter().find(|n| *n == name)?;
    Some(Workload {
        name,
        setup: Setup::Sql(setup),
        run,
    })
}

/// Every workload at `scale`, in [`NAMES`] order.
pub fn all(scale: u32) -> Vec<Workload> {
    NAMES.iter().filter_map(|n| workload(n, scale)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_a_workload() {
        assert_eq!(all(1).len(), NAMES.len());
        assert!(workload("no such workload", 1).is_none());
        let w = workload(HUNDRED_NULLED, 2).unwrap();
        match w.run {
            Run::Sql { sql, rows } => {
                assert_eq!(rows, 50_000);
                assert!(sql.contains("t50 = NULL") && !sql.contains("t51"));
            }
            Run::Pgbench { .. } => panic!("an SQL workload"),
        }
    }
}
