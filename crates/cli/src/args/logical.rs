//! Arguments of `pgcompress logical ...`.

use clap::{Args, Subcommand};
use codec::Spec;
use std::path::PathBuf;

/// A spill method: one of those spill files take, listed when another is given.
fn parse_spill_spec(s: &str) -> Result<Spec, String> {
    Spec::parse_among(s, &logical::spill::methods()).map_err(|e| e.to_string())
}

/// `pgcompress logical recv --help` examples and the exactly-once contract.
pub const RECV_HELP: &str = "Examples:\n  \
pgcompress logical recv --dbname 'host=/var/run/postgresql dbname=shop' \\\n      \
--slot cdc --publication shop_pub --create-slot --if-not-exists -o /data/cdc/shop.jsonl\n  \
pgcompress logical recv --dbname postgresql://repl@db1/shop --slot cdc \\\n      \
--publication orders,customers --spill-dir /fast/spill --spill-compression zstd:1 \\\n      \
--work-mem 256MB -o - | jq .\n  \
PGPASSWORD=... pgcompress logical recv -d 'host=db1 user=repl dbname=shop' \\\n      \
--slot cdc --publication p -o out.jsonl --stop-at-lsn 0/3000000 --json\n  \
pgcompress logical recv -d 'host=db1.example.com dbname=shop sslmode=verify-full \\\n      \
sslrootcert=/etc/pg/ca.pem channel_binding=require' --slot cdc --publication p -o out.jsonl\n  \
pgcompress logical recv -d 'host=db1 dbname=shop' --slot cdc --publication p -o out.jsonl \\\n      \
--metrics 127.0.0.1:9188    # curl -s 127.0.0.1:9188/metrics | grep lag\n\n\
TLS as libpq: sslmode disable, allow, prefer (default), require, verify-ca or verify-full; \
sslrootcert (default ~/.postgresql/root.crt, or system), sslcert and sslkey for a client \
certificate, channel_binding disable, prefer (default) or require; PGSSLMODE, PGSSLROOTCERT, \
PGSSLCERT, PGSSLKEY, PGCHANNELBINDING. Unix sockets never use TLS. hostaddr is the address \
connected to; host stays the name verify-full checks.\n\n\
Timeouts: connecting and logging in take at most connect_timeout seconds (or PGCONNECT_TIMEOUT) \
per address tried, as libpq (unset or 0: no limit; 1 counts as 2); IDENTIFY_SYSTEM, the slot \
lookup and START_REPLICATION must answer within 60 s (or connect_timeout, when longer); \
--create-slot waits for transactions open on the server as long as they last. A timeout is an \
error (exit 2).\n\n\
Signals: SIGINT/SIGTERM end the command promptly at any stage, exit 0. Before the stream starts \
(connecting, --create-slot waiting) the command under way is cancelled on the server and -o FILE \
is not touched.\n\n\
The role needs the REPLICATION attribute (or superuser), the server wal_level = logical, and the \
publications must exist (CREATE PUBLICATION p FOR TABLE ...) and the slot be pgoutput's: both are checked, \
with --spill-compression, before anything is created or started (exit 2 otherwise). Large transactions are streamed by the \
server while in progress and held here, in memory up to --work-mem and then in compressed spill files \
under --spill-dir, until they commit. Spill files hold rows not yet committed: the directory is created \
0700 and its files 0600, and one that exists must belong to this account, be closed to group and others \
(chmod 700) and lie below directories nobody else may change (exit 2 otherwise); one consumer per \
directory.\n\n\
Output: one JSON object per change, in commit order (wal2json format 2 style): action I/U/D/T/M, xid, \
lsn (the commit LSN), timestamp, schema, table, columns [{name,type,value}], identity for updates and \
deletes; B and C lines with --begin-commit.\n\n\
Exactly once (-o FILE): each transaction is appended and fsynced (or every --fsync-interval seconds) and \
FILE.state records the durable offset and last commit LSN; only then is the LSN confirmed to the server. \
After a crash, a restart with the same -o cuts any torn tail and skips transactions already written. \
SIGINT/SIGTERM make it finish durably and exit 0. With -o - nothing is kept across restarts.\n\n\
One stream per file (-o FILE): FILE.state also records the stream the file continues (system identifier \
and timeline of the cluster, database, slot, publications, --begin-commit) and, before each status update \
is sent, the position it confirms. A run whose stream differs, whose slot no longer exists, whose slot's \
confirmed_flush_lsn is past that position (re-created or advanced by someone else: changes would be \
missing), or whose --start is past it, is refused before anything is touched: exit 2, FILE and its state \
unchanged. --start-over empties FILE and begins again. Not detected: a copy of the cluster's data \
directory (same system identifier and timeline), and publications changed under the same names. A state \
written by an older pgcompress (no stream recorded) is refused too: move the file aside or --start-over.\n\n\
Stderr: a line when the stream starts (slot, publications, start LSN, output, spill directory), one \
every --status-interval (at least 1 s) with transactions and changes written, confirmed LSN, lag, memory \
and spill, and one when it stops; on a terminal the progress line is redrawn every second instead; \
with --json and no terminal, only the JSON summary.\n\n\
Exit status: 0 done (a signal at any stage, --stop-at-lsn, --idle-exit, or the server ended the stream); 2 error.";

#[derive(Subcommand, Debug)]
pub enum LogicalCommand {
    /// Consume a logical replication slot (pgoutput) and write committed changes as JSON lines.
    #[command(after_help = RECV_HELP)]
    Recv(RecvArgs),
}

#[derive(Args, Debug)]
pub struct RecvArgs {
    /// Connection: libpq key=value string or postgresql:// URI (hostaddr, connect_timeout,
    /// sslmode and the other TLS keys included); PGHOST, PGHOSTADDR, PGPORT, PGUSER,
    /// PGDATABASE, PGPASSWORD, PGPASSFILE, PGCONNECT_TIMEOUT and PGSSLMODE fill what it leaves
    /// out.
    #[arg(short = 'd', long, value_name = "CONNINFO", default_value = "")]
    pub dbname: String,
    /// The logical replication slot (pgoutput).
    #[arg(short = 'S', long, value_name = "NAME")]
    pub slot: String,
    /// Publication(s) to receive, comma-separated.
    #[arg(
        long,
        value_name = "NAME[,NAME]",
        value_delimiter = ',',
        required = true
    )]
    pub publication: Vec<String>,
    /// Create the slot first (pgoutput).
    #[arg(long)]
    pub create_slot: bool,
    /// With --create-slot: an existing slot of that name is fine.
    #[arg(long, requires = "create_slot")]
    pub if_not_exists: bool,
    /// Start position (the server starts at the later of this and the slot's confirmed LSN);
    /// refused when past what an existing -o FILE holds.
    #[arg(long, value_name = "LSN", value_parser = parse_lsn)]
    pub start: Option<logical::Lsn>,
    /// Empty -o FILE and FILE.state and begin again from the slot's confirmed position,
    /// whatever stream they held: the one way to reuse a file that is refused as another
    /// stream's, or whose slot was re-created or moved on.
    #[arg(long)]
    pub start_over: bool,
    /// Directory for spill files of large in-progress transactions, private to this account:
    /// created 0700 (files 0600); an existing one must be yours and closed to group and others
    /// [default: FILE.spill beside -o FILE; with -o -,
    /// ~/.cache/pgcompress/spill/<system id>-<slot>].
    #[arg(long, value_name = "DIR")]
    pub spill_dir: Option<PathBuf>,
    /// Compression of spill files: lz4, zstd[:N], pglz or none.
    #[arg(long, value_name = "SPEC", default_value = "lz4", value_parser = parse_spill_spec)]
    pub spill_compression: Spec,
    /// Memory for in-progress transactions before they spill (kB, MB, GB).
    #[arg(long, value_name = "SIZE", default_value = "64MB", value_parser = service::size::parse_memory_size)]
    pub work_mem: usize,
    /// Output file, or - for standard output.
    #[arg(short = 'o', long, value_name = "FILE", default_value = "-")]
    pub output: String,
    /// Seconds between fsyncs; 0 fsyncs after every transaction.
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub fsync_interval: f64,
    /// Seconds between status updates to the server (and whenever it asks).
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub status_interval: f64,
    /// Also write a B line before and a C line after each transaction.
    #[arg(long)]
    pub begin_commit: bool,
    /// Exit once the server has sent WAL up to LSN and every transaction before it is written.
    #[arg(long, value_name = "LSN", value_parser = parse_lsn)]
    pub stop_at_lsn: Option<logical::Lsn>,
    /// Exit after S seconds without any data from the server.
    #[arg(long, value_name = "S")]
    pub idle_exit: Option<f64>,
    /// pgoutput protocol version, 1 to the highest the server speaks (3 on PostgreSQL 15, 4
    /// from 16) [default: the highest]. Version 1 has no streaming: large transactions arrive
    /// at commit.
    #[arg(long, value_name = "N")]
    pub proto_version: Option<u32>,
    /// Print a JSON summary at exit (to stdout, or stderr when the output is stdout).
    #[arg(long)]
    pub json: bool,
    /// Serve Prometheus metrics on ADDR:PORT (GET /metrics): transactions, changes, lag,
    /// memory held, spill files; refreshed every second.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
}

/// An LSN in PostgreSQL's `X/X` form.
pub fn parse_lsn(s: &str) -> Result<logical::Lsn, String> {
    logical::Lsn::parse(s).ok_or_else(|| format!("\"{s}\" is not an LSN like 0/16B3748"))
}
