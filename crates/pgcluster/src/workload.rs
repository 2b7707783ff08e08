//! Deterministic workloads that make WAL worth compressing, shared by tests, benchmarks and demos.
//!
//! Each function creates its own tables (dropping earlier ones of the same name), runs, and reports the WAL range
//! it wrote. Data comes from `generate_series` and `md5`, and pgbench uses a fixed `--random-seed`, so the same
//! arguments give the same rows; only concurrent pgbench clients interleave differently from run to run.

use crate::cluster::Cluster;
use crate::error::{Error, Result};

/// The seed passed to `pgbench --random-seed`.
pub const PGBENCH_SEED: u64 = 42;

/// What a workload did: the WAL range it wrote and any program output.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkloadReport {
    /// `pg_current_wal_lsn()` before the workload.
    pub start_lsn: String,
    /// `pg_current_wal_lsn()` after the workload.
    pub end_lsn: String,
    /// WAL bytes between the two LSNs.
    pub wal_bytes: u64,
    /// Standard output of the programs run (pgbench's summary), empty for pure SQL workloads.
    pub output: String,
}

/// Runs `f` and reports the WAL it wrote.
fn measured(cluster: &Cluster, f: impl FnOnce() -> Result<String>) -> Result<WorkloadReport> {
    let start_lsn = cluster.current_wal_lsn()?;
    let output = f()?;
    let end_lsn = cluster.current_wal_lsn()?;
    let sql = format!("SELECT pg_wal_lsn_diff('{end_lsn}', '{start_lsn}')");
    let diff = cluster.query_one(&sql)?;
    let wal_bytes = diff.parse().map_err(|_| Error::UnexpectedOutput {
        sql,
        output: diff.clone(),
        expected: "a non-negative integer",
    })?;
    Ok(WorkloadReport {
        start_lsn,
        end_lsn,
        wal_bytes,
        output,
    })
}

/// pgbench's TPC-B-like workload: `pgbench -i -s scale`, then `transactions` transactions per client from
/// `clients` clients. Mostly small heap and index updates, the bread and butter of OLTP WAL.
pub fn pgbench_tpcb(
    cluster: &Cluster,
    scale: u32,
    transactions: u32,
    clients: u32,
) -> Result<WorkloadReport> {
    measured(cluster, || {
        cluster.pgbench_init(scale)?;
        let clients = clients.max(1).to_string();
        let transactions = transactions.to_string();
        let seed = format!("--random-seed={PGBENCH_SEED}");
        cluster.pgbench(&["-n", "-c", &clients, "-j", "1", "-t", &transactions, &seed])
    })
}

/// Inserts `rows` rows of long, repetitive but varied text into `text_heavy`, then updates a third of them.
///
/// Bodies are a few hundred bytes of recurring phrases plus an md5, and every 50th row is long enough
/// (about 3 kB) to be TOAST-compressed with pglz, so the WAL holds both plain and compressed text.
pub fn text_heavy(cluster: &Cluster, rows: u32) -> Result<WorkloadReport> {
    let sql = format!(
        "DROP TABLE IF EXISTS text_heavy;
         CREATE TABLE text_heavy (id int PRIMARY KEY, category text NOT NULL, body text NOT NULL);
         INSERT INTO text_heavy
         SELECT i,
                (ARRAY['invoice', 'shipment', 'refund', 'support', 'audit'])[1 + i % 5],
                repeat('customer ' || (i % 97) || ' ordered item ' || (i % 13) || ' with note: ', 1 + i % 7)
                  || md5(i::text)
                  || repeat(' lorem ipsum dolor sit amet', 2 + i % 11)
                  || CASE WHEN i % 50 = 0 THEN repeat(' the quick brown fox ' || (i % 7), 120) ELSE '' END
         FROM generate_series(1, {rows}) AS i;
         UPDATE text_heavy SET body = body || ' [updated ' || md5((id * 7)::text) || ']' WHERE id % 3 = 0;"
    );
    measured(cluster, || cluster.psql(&sql).map(|_| String::new()))
}

/// Fills `bulk_updates` with `rows` fixed-width rows, then runs `rounds` full-table updates, each after a
/// checkpoint so that the first touch of every page writes a full-page image.
pub fn bulk_updates(cluster: &Cluster, rows: u32, rounds: u32) -> Result<WorkloadReport> {
    let setup = format!(
        "DROP TABLE IF EXISTS bulk_updates;
         CREATE TABLE bulk_updates (id int PRIMARY KEY, counter bigint NOT NULL DEFAULT 0,
                                    flag boolean NOT NULL DEFAULT false, pad char(100) NOT NULL)
           WITH (fillfactor = 70);
         INSERT INTO bulk_updates (id, pad) SELECT i, 'row ' || i FROM generate_series(1, {rows}) AS i;"
    );
    let round = "CHECKPOINT; UPDATE bulk_updates SET counter = counter + 1, flag = NOT flag;";
    measured(cluster, || {
        cluster.psql(&setup)?;
        for _ in 0..rounds {
            cluster.psql(round)?;
        }
        Ok(String::new())
    })
}

/// Common English words, the most frequent first; [`prose_round`] draws from them with a skew towards the
/// start of the list, so its text has roughly the word frequencies of English.
const PROSE_WORDS: &str = "the of and to a in is that for it as was with be by on not he this are or his from at \
which but have an they you were her she there one all we their been has would when who will more no if out so \
said what up its about than into them can only other new some could time these two may then do first any my now \
such like our over man me even most made after also did many before must through back years where much your way \
well down should because each just those people how too little state good very make world still own see men work \
long get here between both life being under never day same another know while last might us great old year off \
come since against go came right used take three himself few house use during without again place around however \
home small found thought went say part once general high upon school every does got united left number course war \
until always away something fact though water less public put think almost hand enough far took head yet \
government system better set told nothing night end why called didn't eyes find going look asked later knew \
point next program city business give group toward young days let room president side social given present \
several order national possible rather second face per among form important often things looking early white \
case john become large big need four within felt along children saw best church ever least power development \
light thing seemed family interest want members mind country area others done turned although open god service \
certain kind problem began different door thus help sense means whole matter perhaps itself york times law human \
line above name example action company hands local show whether five history gave today either act feet across \
taken past quite anything seen having death week experience body word half really field am car words already \
themselves information tell together college shall money period held keep sure probably free seems political \
real behind cannot question air office making brought whose special major heard problems ago became federal \
moment study available known result street economic boy position reason change south board individual job society";

/// Customer names for the `author` column.
const PROSE_AUTHORS: &str = "Alice Martin,Bruno Keller,Chiara Rossi,Daniel Okafor,Emma Lindqvist,Farid Haddad,\
Grace Chen,Hugo Moreau,Ingrid Nilsen,Jonas Weber,Keiko Tanaka,Liam O'Brien,Maria Garcia,Nina Petrova,\
Oscar Silva,Priya Raman";

/// `hashint8` of an expression mapped to a float in [0, 1): PostgreSQL's own hash, so rows are reproducible.
fn unit(expr: &str) -> String {
    format!("((hashint8(({expr})::bigint)::bigint & 2147483647)::float8 / 2147483648.0)")
}

/// Creates `prose_words` (the vocabulary, numbered) and `prose` (an id, an author, a title, a body, a time).
fn prose_setup_sql() -> String {
    let quote = |w: &str| format!("'{}'", w.replace('\'', "''"));
    let words: Vec<String> = PROSE_WORDS.split_whitespace().map(quote).collect();
    format!(
        "DROP TABLE IF EXISTS prose_words, prose;
         CREATE TABLE prose_words (id int PRIMARY KEY, word text NOT NULL);
         INSERT INTO prose_words SELECT n, w FROM unnest(ARRAY[{words}]) WITH ORDINALITY AS t(w, n);
         CREATE TABLE prose (id bigint PRIMARY KEY, author text NOT NULL, title text NOT NULL,
                             body text NOT NULL, edited timestamptz NOT NULL);",
        words = words.join(","),
    )
}

/// SQL for rows `first..=last` of `prose`. A body is 4 to 11 sentences of 6 to 20 words, frequent words more
/// often (the square skews the draw towards the start of [`PROSE_WORDS`]), capitalised, a comma after the
/// fourth word of one sentence in three, a full stop at the end: about 0.4 to 1.2 kB.
fn prose_insert_sql(first: u64, last: u64) -> String {
    let words = PROSE_WORDS.split_whitespace().count();
    let authors: Vec<String> = PROSE_AUTHORS
        .split(',')
        .map(|a| format!("'{}'", a.replace('\'', "''")))
        .collect();
    format!(
        "INSERT INTO prose
         SELECT i, (ARRAY[{authors}])[1 + floor({na} * {author})::int],
                initcap(min(t) FILTER (WHERE s = 1)),
                string_agg(upper(left(t, 1)) || substr(t, 2) || '.', ' ' ORDER BY s),
                timestamptz '2024-01-01 00:00:00+00' + i * interval '17 seconds'
         FROM (SELECT i, s, string_agg(w.word, CASE WHEN k = 5 AND s % 3 = 0 THEN ', ' ELSE ' ' END ORDER BY k) AS t
               FROM generate_series({first}, {last}) AS i
               CROSS JOIN LATERAL generate_series(1, 4 + floor(8 * {sentences})::int) AS s
               CROSS JOIN LATERAL generate_series(1, 6 + floor(15 * {length})::int) AS k
               JOIN prose_words AS w ON w.id = 1 + floor({words} * {word} ^ 2)::int
               GROUP BY i, s) AS sentences
         GROUP BY i;",
        authors = authors.join(","),
        na = authors.len(),
        author = unit("i * 5 + 1"),
        sentences = unit("i * 3"),
        length = unit("i * 1009 + s * 31"),
        word = unit("i * 7919 + s * 131 + k"),
    )
}

/// One round of a text-heavy workload of English-like prose: a checkpoint (so the round's first change to each
/// page writes a full-page image), `rows` new rows (the text stays below the TOAST threshold, so it sits in the
/// heap and in the WAL uncompressed), then eight words appended to one row in eight among the rows written
/// before. Round 0 creates the tables. The same rounds give the same rows.
pub fn prose_round(cluster: &Cluster, round: u32, rows: u32) -> Result<WorkloadReport> {
    let first = u64::from(round) * u64::from(rows) + 1;
    let last = first + u64::from(rows) - 1;
    let setup = if round == 0 {
        prose_setup_sql()
    } else {
        String::new()
    };
    let words = PROSE_WORDS.split_whitespace().count();
    let sql = format!(
        "{setup}
         CHECKPOINT;
         {insert}
         UPDATE prose SET edited = edited + interval '1 day',
                body = body || ' Edit:' || (SELECT string_agg(' ' || w.word, '' ORDER BY k)
                                            FROM generate_series(1, 8) AS k
                                            JOIN prose_words AS w ON w.id = 1 + floor({words} * {word} ^ 2)::int)
         WHERE id < {first} AND (id + {round}) % 8 = 0;",
        insert = prose_insert_sql(first, last),
        word = unit(&format!("prose.id * 104729 + k * 13 + {round}")),
    );
    measured(cluster, || cluster.psql(&sql).map(|_| String::new()))
}
