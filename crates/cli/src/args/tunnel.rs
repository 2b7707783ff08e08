//! Arguments of `pgcompress tunnel ...`.

use clap::{Args, Subcommand, ValueEnum};
use std::path::PathBuf;

/// The setup in five commands, shown under `pgcompress tunnel --help`.
pub const TUNNEL_HELP: &str = concat!(
    "Setup in five commands (keys, server, client, connect):\n",
    "  pgcompress tunnel keys ./tunnel-keys\n",
    "  # copy ca.pem, server.pem, server-key.pem to the database host;\n",
    "  # ca.pem, client.pem, client-key.pem to the application host\n",
    "  pgcompress tunnel server --listen 0.0.0.0:7432 --upstream /var/run/postgresql \\\n",
    "      --ca ca.pem --cert server.pem --key server-key.pem\n",
    "  pgcompress tunnel client --listen 127.0.0.1:6432 --server db.example.com:7432 \\\n",
    "      --method zstd:1 --ca ca.pem --cert client.pem --key client-key.pem\n",
    "  psql \"host=127.0.0.1 port=6432 dbname=postgres user=postgres\"\n",
    "  pgcompress tunnel stats /run/tunnel-client.json   # with --stats on a half\n\n",
    "Exit status: 0 clean (also after SIGTERM/SIGINT/SIGHUP and a drain); 1 runtime error;\n",
    "2 usage or configuration error (bad key file, bad method, address in use)."
);

#[derive(Subcommand, Debug)]
pub enum TunnelCommand {
    /// Write a CA and a server and a client certificate for a quick start.
    #[command(
        after_help = "Writes DIR/ca.pem, ca-key.pem, server.pem, server-key.pem, client.pem, \
client-key.pem. The server certificate names localhost, 127.0.0.1, ::1 and each --server-name.\n\n\
Examples:\n  pgcompress tunnel keys ./tunnel-keys\n  \
pgcompress tunnel keys ./tunnel-keys --server-name db.example.com --days 365 --force"
    )]
    Keys(KeysArgs),
    /// The half beside PostgreSQL: accepts client halves with a certificate from --ca.
    #[command(after_help = "Examples:\n  \
pgcompress tunnel server --listen 0.0.0.0:7432 --upstream /var/run/postgresql \\\n      \
--ca keys/ca.pem --cert keys/server.pem --key keys/server-key.pem\n  \
pgcompress tunnel server --listen 0.0.0.0:7432 --upstream 127.0.0.1:5432 \\\n      \
--ca keys/ca.pem --cert keys/server.pem --key keys/server-key.pem \\\n      \
--stats /run/tunnel-server.json\n\n\
Exit status: 0 clean (also after SIGTERM/SIGINT/SIGHUP and a drain); 1 runtime error; 2 usage or configuration \
error (a key file that does not load or is not its certificate's, an address in use).")]
    Server(ServerArgs),
    /// The half beside the applications: they connect to it as to PostgreSQL.
    #[command(after_help = "Examples:\n  \
pgcompress tunnel client --listen 127.0.0.1:6432 --server db.example.com:7432 --method zstd:1 \\\n      \
--ca keys/ca.pem --cert keys/client.pem --key keys/client-key.pem\n  \
pgcompress tunnel client --listen /tmp --port 6432 --server 10.0.0.5:7432 \\\n      \
--server-name db.example.com --method lz4 \\\n      \
--ca keys/ca.pem --cert keys/client.pem --key keys/client-key.pem\n  \
pgcompress tunnel client --listen 127.0.0.1:6432 --server db.example.com:7432 --method auto \\\n      \
--ca keys/ca.pem --cert keys/client.pem --key keys/client-key.pem\n  \
psql \"host=127.0.0.1 port=6432 dbname=postgres\"\n\n\
Exit status: 0 clean (also after SIGTERM/SIGINT/SIGHUP and a drain); 1 runtime error; 2 usage or configuration \
error (a key file that does not load or is not its certificate's, a method the link does not take, an \
address in use).")]
    Client(ClientArgs),
    /// Print a stats file written by a running or finished half.
    #[command(
        after_help = "Examples:\n  pgcompress tunnel stats /run/tunnel-client.json\n  \
pgcompress tunnel stats /run/tunnel-client.json --json"
    )]
    Stats(StatsArgs),
}

#[derive(Args, Debug)]
pub struct KeysArgs {
    /// Directory to write the keys into (created if missing).
    pub dir: PathBuf,
    /// Validity of the certificates in days.
    #[arg(long, default_value_t = 825, value_parser = clap::value_parser!(u32).range(1..=36500))]
    pub days: u32,
    /// Another name (DNS or IP) for the server certificate; repeatable.
    #[arg(long = "server-name")]
    pub server_names: Vec<String>,
    /// Overwrite existing files.
    #[arg(long)]
    pub force: bool,
}

/// Options both halves share.
#[derive(Args, Debug)]
pub struct Common {
    /// CA certificate (PEM) the other half's certificate must chain to.
    #[arg(long, value_name = "FILE")]
    pub ca: PathBuf,
    /// This half's certificate (PEM).
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// This half's private key (PEM).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Stats file (JSON), rewritten every second and at exit.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// One JSON object per connection line (and refusal and drain) and for the exit summary.
    #[arg(long)]
    pub json: bool,
    /// Seconds open connections get to finish after SIGTERM/SIGINT/SIGHUP (a second signal ends
    /// them at once).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub drain_timeout: u64,
    /// Most connections served at once (applications on the client half, links on the
    /// server half); past it a new one is refused with "too many connections".
    #[arg(long, value_name = "N", default_value_t = wire::net::DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_connections: usize,
    /// Serve Prometheus metrics at http://ADDR:PORT/metrics (pgcompress_tunnel_*).
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<String>,
    /// Log lines on stderr: text (`pgcompress tunnel <half>: ...`), or json: one JSON object
    /// per line (ts, level, half, event, message and the event's fields) for every line,
    /// errors included.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormatArg::Text,
          hide_possible_values = true)]
    pub log_format: LogFormatArg,
}

/// `--log-format`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormatArg {
    /// `pgcompress tunnel <half>: ...` lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Args, Debug)]
pub struct ServerArgs {
    /// Address the client halves connect to (ADDR:PORT).
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,
    /// PostgreSQL: HOST:PORT or a socket directory.
    #[arg(long, value_name = "HOST:PORT|DIR")]
    pub upstream: String,
    /// Port of the socket file when --upstream is a directory.
    #[arg(long, value_name = "PORT", default_value_t = 5432)]
    pub upstream_port: u16,
    #[command(flatten)]
    pub batching: Batching,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Args, Debug)]
pub struct ClientArgs {
    /// Where applications connect: ADDR:PORT or a socket directory.
    #[arg(long, value_name = "ADDR:PORT|DIR")]
    pub listen: String,
    /// Port of the socket file when --listen is a directory (SOCKETDIR/.s.PGSQL.PORT).
    #[arg(long, value_name = "PORT", default_value_t = 5432)]
    pub port: u16,
    /// The server half (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT")]
    pub server: String,
    /// Compression method in both directions: zstd[:LEVEL], lz4[:LEVEL], none, or auto (each
    /// direction of each connection adapts among none, lz4 and zstd:1/3/6/9/12 to the link, the
    /// CPU and the data, zstd:9 and zstd:12 only where the link is the limit; needs a server
    /// half that knows auto).
    #[arg(long, value_name = "SPEC", default_value = "zstd:1")]
    pub method: String,
    /// Name the server half's certificate must carry (default: the host of --server).
    #[arg(long, value_name = "NAME")]
    pub server_name: Option<String>,
    /// Certificate (PEM) to serve TLS to applications that ask (sslmode=require).
    #[arg(long, value_name = "FILE", requires = "local_key")]
    pub local_cert: Option<PathBuf>,
    /// Private key (PEM) for --local-cert.
    #[arg(long, value_name = "FILE", requires = "local_cert")]
    pub local_key: Option<PathBuf>,
    #[command(flatten)]
    pub batching: Batching,
    #[command(flatten)]
    pub common: Common,
}

/// What each half compresses of what it sends; the same flags on both halves (the method is
/// the client half's --method, which its handshake asks of the server half).
#[derive(Args, Debug)]
pub struct Batching {
    /// Message types this half compresses of what it sends: "all", or type bytes such as
    /// dDQ (d CopyData, D DataRow, Q Query).
    #[arg(long, value_name = "TYPES", default_value = "all")]
    pub compress_types: String,
    /// Fewest bytes read together (one batch of messages, header included) that this half
    /// compresses; a smaller batch crosses verbatim.
    #[arg(long, value_name = "BYTES", default_value_t = 60)]
    pub threshold: usize,
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// The stats file.
    pub file: PathBuf,
    /// Print the file's JSON object.
    #[arg(long)]
    pub json: bool,
}
