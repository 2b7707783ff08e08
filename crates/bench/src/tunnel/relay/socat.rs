//! The floor of any two-hop proxy: a plain TCP relay pair of socat processes.

use super::super::pair::free_port;
use super::{require, PgTarget, Proc};
use crate::error::Result;
use std::ffi::OsStr;
use std::net::Ipv4Addr;
use std::process::Command;

/// A plain TCP relay pair: socat in the server namespace (`TCP-LISTEN` on the server address, one forked
/// child per connection, to PostgreSQL) and socat in the client namespace (`TCP-LISTEN` on 127.0.0.1, to
/// the server one). Every TCP socket has `TCP_NODELAY`, as libpq's and PostgreSQL's own have, so small
/// request-response messages are not held back by Nagle's algorithm: the floor of any two-hop proxy, not
/// a misconfigured one. Dropping it stops both trees.
pub struct SocatPair {
    client: Option<Proc>,
    server: Option<Proc>,
    local_port: u16,
}

impl SocatPair {
    /// Starts the server socat through `server`, then the client socat through `client`, and returns once
    /// both listen.
    pub fn start(
        server: &dyn Fn(&OsStr) -> Command,
        client: &dyn Fn(&OsStr) -> Command,
        server_addr: Ipv4Addr,
        pg: PgTarget,
    ) -> Result<SocatPair> {
        require("socat", "socat")?;
        let port = free_port()?;
        let (s, _) = Proc::start(
            "socat server",
            "socat",
            server(OsStr::new("socat"))
                .args(["-d", "-d"])
                .arg(format!(
                    "TCP4-LISTEN:{port},bind={server_addr},reuseaddr,fork,nodelay"
                ))
                .arg(pg.socat_address()),
            "listening on",
        )?;
        let mut pair = SocatPair {
            client: None,
            server: Some(s),
            local_port: free_port()?,
        };
        let (c, _) = Proc::start(
            "socat client",
            "socat",
            client(OsStr::new("socat"))
                .args(["-d", "-d"])
                .arg(format!(
                    "TCP4-LISTEN:{},bind=127.0.0.1,reuseaddr,fork,nodelay",
                    pair.local_port
                ))
                .arg(format!("TCP4:{server_addr}:{port},nodelay")),
            "listening on",
        )?;
        pair.client = Some(c);
        Ok(pair)
    }

    /// The client socat's port on 127.0.0.1 (in the client namespace): connect here as to PostgreSQL.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The two socat parents, labelled `socat client` and `socat server`, for CPU figures
    /// ([`tree_cpu_seconds`] counts their forked children too).
    pub fn pids(&self) -> Vec<(String, u32)> {
        [&self.client, &self.server]
            .into_iter()
            .flatten()
            .map(|p| (p.label.to_string(), p.pid()))
            .collect()
    }
}

impl Drop for SocatPair {
    fn drop(&mut self) {
        for p in [self.client.as_mut(), self.server.as_mut()]
            .into_iter()
            .flatten()
        {
            p.stop();
        }
    }
}
