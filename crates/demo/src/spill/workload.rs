//! The workloads of `bench spill`: SQL run through psql against the throwaway cluster, each writing into a
//! table of its own so that its publication carries its changes alone.

use crate::error::{Context, Error, Result};
use pgcluster::Cluster;

/// One workload: its table, how it fills it, and how pgoutput should send it.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// The name `--workloads` takes.
    pub name: &'static str,
    /// What it does, for the report.
    pub about: &'static str,
    /// The table it writes (its publication publishes this table only).
    pub table: &'static str,
    /// pgoutput `binary 'true'`: values in their send form (bytea as its bytes, not hex text).
    pub binary: bool,
    /// Creates the table.
    ddl: &'static str,
    /// Runs the work for `--rows`.
    run: fn(&Cluster, u64) -> Result<()>,
}

/// Every workload, in the order they run; all but `large` run by default.
pub const ALL: [Workload; 6] = [
    Workload {
        name: "seed",
        about: "one INSERT of 'Hello number n°'||i for --rows rows (the seed patch's workload)",
        table: "spill_seed",
        binary: false,
        ddl: "CREATE TABLE spill_seed (i int PRIMARY KEY, t text)",
        run: seed,
    },
    Workload {
        name: "bytea",
        about: "one INSERT of rows/20 rows of 1 KiB pseudo-random bytea (md5 digests), sent binary",
        table: "spill_bytea",
        binary: true,
        ddl: "CREATE TABLE spill_bytea (i int PRIMARY KEY, b bytea)",
        run: bytea,
    },
    Workload {
        name: "wide",
        about: "one INSERT of rows/10 rows of 40 columns (int, bigint, numeric, float8, bool, date, \
                timestamptz, text, NULLs)",
        table: "spill_wide",
        binary: false,
        ddl: WIDE_DDL,
        run: wide,
    },
    Workload {
        name: "mix",
        about: "2,000 transactions of 5 rows, then 4 transactions of rows/8 rows each",
        table: "spill_mix",
        binary: false,
        ddl: "CREATE TABLE spill_mix (i bigint PRIMARY KEY, t text)",
        run: mix,
    },
    Workload {
        name: "interleaved",
        about: "two concurrent transactions of rows/4 rows each in batches of 1,000, every third batch \
                rolled back to its savepoint",
        table: "spill_inter",
        binary: false,
        ddl: "CREATE TABLE spill_inter (s int, i int, t text, PRIMARY KEY (s, i))",
        run: interleaved,
    },
    Workload {
        name: "large",
        about: "one INSERT of rows/8 rows with an 8 KiB text value stored out of line (about 1 KB of \
                changes per --rows; not run by default)",
        table: "spill_large",
        binary: false,
        ddl: "CREATE TABLE spill_large (i int PRIMARY KEY, t text); \
              ALTER TABLE spill_large ALTER COLUMN t SET STORAGE EXTERNAL",
        run: large,
    },
];

/// The workloads run when `--workloads` is not given.
pub const DEFAULT: &str = "seed,bytea,wide,mix,interleaved";

/// The workloads named in `list` (names separated by commas), in the order given.
pub fn select(list: &str) -> Result<Vec<Workload>> {
    list.split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(|n| {
            ALL.iter()
                .find(|w| w.name == n)
                .copied()
                .ok_or_else(|| Error::UnknownWorkload {
                    name: n.to_string(),
                    choices: ALL.map(|w| format!("{:?}", w.name)).join(", "),
                })
        })
        .collect()
}

impl Workload {
    /// Creates the workload's table.
    pub fn create(&self, cluster: &Cluster) -> Result<()> {
        cluster
            .psql(self.ddl)
            .with_context(|| format!("creating the {} workload's table", self.name))?;
        Ok(())
    }

    /// Runs the work and returns the rows its table holds afterwards: the inserts every replay must see.
    pub fn run(&self, cluster: &Cluster, rows: u64) -> Result<u64> {
        (self.run)(cluster, rows).with_context(|| format!("running the {} workload", self.name))?;
        let sql = format!("SELECT count(*) FROM {}", self.table);
        let n = cluster.query_one(&sql)?;
        n.parse().map_err(|_| Error::Parse {
            what: sql,
            text: n,
            expected: "a row count",
        })
    }
}

fn seed(c: &Cluster, rows: u64) -> Result<()> {
    c.psql(&format!(
        "INSERT INTO spill_seed SELECT i, 'Hello number n°'||i::text FROM generate_series(1, {rows}) AS i"
    ))?;
    Ok(())
}

fn bytea(c: &Cluster, rows: u64) -> Result<()> {
    // 64 md5 digests of distinct inputs: 1 KiB that no compressor can shrink.
    c.psql(&format!(
        "INSERT INTO spill_bytea SELECT i, (SELECT string_agg(decode(md5(i::text||':'||j::text), 'hex'), \
         ''::bytea ORDER BY j) FROM generate_series(1, 64) AS j) FROM generate_series(1, {}) AS i",
        (rows / 20).max(1)
    ))?;
    Ok(())
}

/// Ten groups of four columns of different types.
const WIDE_DDL: &str = "CREATE TABLE spill_wide (id int PRIMARY KEY, \
    a1 int, b1 bigint, c1 numeric, d1 text, a2 float8, b2 bool, c2 date, d2 timestamptz, \
    a3 int, b3 bigint, c3 numeric, d3 text, a4 float8, b4 bool, c4 date, d4 timestamptz, \
    a5 int, b5 bigint, c5 numeric, d5 text, a6 float8, b6 bool, c6 date, d6 timestamptz, \
    a7 int, b7 bigint, c7 numeric, d7 text, a8 float8, b8 bool, c8 date, d8 timestamptz, \
    a9 int, b9 bigint, c9 numeric, d9 text, a0 float8, b0 bool, c0 date)";

fn wide(c: &Cluster, rows: u64) -> Result<()> {
    let mut cols = Vec::new();
    for g in ["1", "3", "5", "7", "9"] {
        cols.push(format!("i * {g}"));
        cols.push(format!("i::bigint * 1000003 + {g}"));
        cols.push(format!("(i * {g})::numeric / 7"));
        cols.push(format!(
            "CASE WHEN i % 5 = 0 THEN NULL ELSE 'row '||i||' column d{g} '||md5(i::text) END"
        ));
    }
    for g in ["2", "4", "6", "8", "0"] {
        cols.push(format!("i / 3.0 + {g}"));
        cols.push(format!("i % {} = 0", g.parse::<u32>().unwrap_or(0) + 2));
        cols.push(format!("date '2020-01-01' + (i % 1000) + {g}"));
        if g != "0" {
            cols.push(format!(
                "timestamptz '2024-01-01 00:00:00+00' + i * interval '1 second' * {g}"
            ));
        }
    }
    c.psql(&format!(
        "INSERT INTO spill_wide SELECT i, {} FROM generate_series(1, {}) AS i",
        order_wide(&cols).join(", "),
        (rows / 10).max(1)
    ))?;
    Ok(())
}

/// The generated expressions in the table's column order: groups 1,2 then 3,4 ... then 9,0.
fn order_wide(cols: &[String]) -> Vec<String> {
    let (odd, even) = cols.split_at(20);
    let mut out = Vec::with_capacity(cols.len());
    let mut e = even.iter();
    for chunk in odd.chunks(4) {
        out.extend(chunk.iter().cloned());
        for _ in 0..4 {
            if let Some(x) = e.next() {
                out.push(x.clone());
            }
        }
    }
    out
}

fn mix(c: &Cluster, rows: u64) -> Result<()> {
    // COMMIT inside a DO block ends each small transaction (PostgreSQL 11+, outside a transaction block).
    c.psql(
        "DO $$ BEGIN FOR k IN 0..1999 LOOP \
           INSERT INTO spill_mix SELECT k * 5 + j, 'small '||k||'/'||j FROM generate_series(0, 4) AS j; \
           COMMIT; END LOOP; END $$",
    )?;
    let large = (rows / 8).max(1);
    for t in 0..4u64 {
        let base = 1_000_000_000 + t * large;
        c.psql(&format!(
            "INSERT INTO spill_mix SELECT {base} + i, 'large {t} row '||i FROM generate_series(0, {}) AS i",
            large - 1
        ))?;
    }
    Ok(())
}

fn interleaved(c: &Cluster, rows: u64) -> Result<()> {
    let per = (rows / 4).max(1000);
    let batches = per.div_ceil(1000);
    // Each batch is a subtransaction (a block with an EXCEPTION clause); raising rolls it back, which
    // pgoutput streams as a Stream Abort of the subtransaction.
    let session = |s: u32| {
        format!(
            "DO $$ BEGIN FOR k IN 0..{} LOOP BEGIN \
               INSERT INTO spill_inter SELECT {s}, k * 1000 + j, 'session {s} batch '||k||' row '||j \
                 FROM generate_series(0, 999) AS j; \
               IF k % 3 = 2 THEN RAISE EXCEPTION 'roll back batch %', k; END IF; \
             EXCEPTION WHEN raise_exception THEN NULL; END; END LOOP; END $$",
            batches - 1
        )
    };
    std::thread::scope(|scope| {
        let a = scope.spawn(|| c.psql(&session(1)));
        let b = scope.spawn(|| c.psql(&session(2)));
        let ra = a
            .join()
            .map_err(|_| Error::Internal("a workload thread panicked"))?;
        let rb = b
            .join()
            .map_err(|_| Error::Internal("a workload thread panicked"))?;
        ra?;
        rb?;
        Ok(())
    })
}

fn large(c: &Cluster, rows: u64) -> Result<()> {
    c.psql(&format!(
        "INSERT INTO spill_large SELECT i, repeat(md5(i::text), 256) FROM generate_series(1, {}) AS i",
        (rows / 8).max(1)
    ))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_select_workloads() {
        let w = select(DEFAULT).expect("defaults");
        assert_eq!(w.len(), 5);
        assert!(w.iter().all(|w| w.name != "large"));
        assert_eq!(select(" large ,seed").expect("two")[0].name, "large");
        let e = select("seed,nope").unwrap_err().to_string();
        assert!(
            e.contains("\"nope\"") && e.contains("\"interleaved\""),
            "{e}"
        );
    }

    #[test]
    fn wide_columns_follow_the_table() {
        let cols: Vec<String> = (0..39).map(|i| i.to_string()).collect();
        let ordered = order_wide(&cols);
        assert_eq!(ordered.len(), 39);
        // a1 b1 c1 d1 (odd group 1), then a2 b2 c2 d2 (even group 2).
        assert_eq!(&ordered[..8], &["0", "1", "2", "3", "20", "21", "22", "23"]);
    }
}
