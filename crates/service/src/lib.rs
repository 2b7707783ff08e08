//! What every long-running command of pgcompress shares (the tunnel's halves, `archive serve`,
//! `archive get --prefetch`, `logical recv`, `demo`), in one place so a change to it happens once.
//!
//! Belongs here: how a command learns it was asked to stop ([`stop`]: the process's one
//! SIGINT/SIGTERM handler and the token every part of the command looks at), where its settings
//! come from ([`settings`]: flag, then environment, then config file, then default, each value
//! knowing its layer), the `--metrics` endpoint's request rules ([`scrape`], sans-IO, fuzzed), the
//! threaded endpoint that answers by them ([`endpoint`]), and what the kernel says about this
//! process ([`process`], the `process_*` metrics), and the pid and lock files that make one
//! process the owner of a role ([`pidlock`]); and the syntax every command's flags share for
//! sizes ([`size`]), so that `--work-mem 64MB` reads the same in `pgcompress` and the lab.
//!
//! Does not belong here: the keys a command has and what they mean; anything about PostgreSQL's protocols, WAL or the archive format (the
//! crates for those depend on this one, never the reverse), the tunnel's async endpoint on its
//! tokio runtime (it lives with the tunnel in `wire::net` and answers by [`scrape`]), and the
//! figures a command exports (each command renders its own and hands the text to [`endpoint`]).
#![deny(missing_docs)]

pub mod endpoint;
pub mod error;
pub mod pidlock;
pub mod process;
pub mod scrape;
pub mod settings;
pub mod size;
pub mod stop;

pub use error::ServiceError;
pub use process::ProcessFacts;
pub use stop::Stop;
