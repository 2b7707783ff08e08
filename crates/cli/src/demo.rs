//! `pgcompress demo`.

use crate::args::DemoArgs;
use std::process::ExitCode;

pub fn run(_a: DemoArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("demo is not built yet")
}
