//! The tunnel driven from outside, as a DBA runs it: `pgcompress tunnel keys`, a server half beside
//! PostgreSQL and a client half for the applications, each a child process; and what their stats files
//! say once they have stopped.

mod config;
mod meter;
pub mod relay;
pub mod report;
pub mod run;
pub mod tools;
pub mod tpch;
pub mod workload;

use demo::pair::{self, child};

pub use pair::{HalfStats, Pair, PairOptions, Placement, Traffic};
