//! Command-line arguments.

pub mod archive;
pub mod demo;
pub mod logical;
pub mod tunnel;
pub mod wal;

use clap::{Parser, Subcommand};

/// Cut the bytes PostgreSQL writes and sends, and measure it.
#[derive(Parser, Debug)]
#[command(name = "pgcompress", version, about, long_about = None)]
#[command(
    after_help = "Examples:\n  pgcompress wal stats $PGDATA/pg_wal\n  pgcompress wal stats --json 000000010000000000000003 000000010000000000000004\n  pgcompress wal verify /archive/wal\n  pgcompress demo"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Read real WAL: statistics, verification and compression advice.
    #[command(subcommand)]
    Wal(wal::WalCommand),
    /// Run a throwaway cluster under each wal_compression setting and compare.
    Demo(demo::DemoArgs),
    /// WAL-aware archive_command / restore_command, to a directory or S3-compatible storage.
    #[command(subcommand, after_help = archive::ARCHIVE_HELP)]
    Archive(archive::ArchiveCommand),
    /// Change data capture from a logical replication slot (pgoutput), with compressed spill.
    #[command(subcommand)]
    Logical(logical::LogicalCommand),
    /// Compressed PostgreSQL wire protocol between two halves over mutual TLS.
    #[command(subcommand, after_help = tunnel::TUNNEL_HELP)]
    Tunnel(tunnel::TunnelCommand),
}
