//! What DBAs use today to compress PostgreSQL traffic: an `ssh -C` port forward through an sshd of its own.

use super::super::pair::free_port;
use super::{require, PgTarget, Proc};
use crate::error::{Error, IoContext, Result};
use crate::sys::checked_output;
use std::ffi::{OsStr, OsString};
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Debian's OpenSSH server; sshd re-executes itself and insists on an absolute path.
const SSHD: &str = "/usr/sbin/sshd";
/// sshd's privilege separation directory (Debian's openssh-server creates it at boot, not at install).
const PRIVSEP_DIR: &str = "/run/sshd";

/// An `ssh -C` port forward: an sshd of its own in the server namespace (Debian's OpenSSH, host key,
/// authorized key and config in a temporary directory, the port given, the server address only; nothing
/// of the system's sshd is read or touched) and `ssh -C -N -L` in the client namespace. The cipher is
/// OpenSSH's default; [`SshForward::negotiated`] says which one it was.
pub struct SshForward {
    ssh: Option<Proc>,
    sshd: Option<Proc>,
    local_port: u16,
    negotiated: String,
    /// Holds the keys and the config; removed after the processes are stopped.
    _dir: tempfile::TempDir,
}

/// Runs `ssh-keygen` for a new ed25519 key without a passphrase at `path`.
fn keygen(path: &Path) -> Result<()> {
    let mut cmd = Command::new("ssh-keygen");
    cmd.args([
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-C",
        "pgcompress-bench",
        "-f",
    ])
    .arg(path);
    checked_output(
        &mut cmd,
        "ssh-keygen",
        &format!("ssh-keygen -f {}", path.display()),
    )?;
    Ok(())
}

/// Writes `text` to `path` with mode 0600.
fn write_private(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).io(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .io(|| format!("setting the mode of {}", path.display()))
}

/// What ssh's `-v` lines say was negotiated: the OpenSSH version, the cipher each way, the compression
/// and its level. Fails when compression was not negotiated: then it would not be the `-C` configuration.
fn negotiated(lines: &[String]) -> Result<String> {
    let version = lines
        .iter()
        .find(|l| l.starts_with("OpenSSH_"))
        .map(|l| l.split(',').next().unwrap_or(l).trim().to_string());
    let kex = |dir: &str| {
        lines.iter().find_map(|l| {
            let rest = &l[l.find(&format!("kex: {dir} cipher: "))? + dir.len() + 14..];
            let cipher = rest.split_whitespace().next()?.to_string();
            let comp = rest.split("compression: ").nth(1)?.trim().to_string();
            Some((cipher, comp))
        })
    };
    let level = lines.iter().find_map(|l| {
        l.split("Enabling compression at level ")
            .nth(1)
            .map(|s| s.trim_end_matches('.').trim().to_string())
    });
    let (Some((c2s, comp_c2s)), Some((s2c, comp_s2c))) =
        (kex("client->server"), kex("server->client"))
    else {
        return Err(Error::Tunnel {
            what: "ssh -C".into(),
            reason: "ssh -v did not say which cipher and compression were negotiated".into(),
        });
    };
    if comp_c2s == "none" || comp_s2c == "none" || level.is_none() {
        return Err(Error::Tunnel {
            what: "ssh -C".into(),
            reason: format!(
                "compression was not negotiated (client->server {comp_c2s}, server->client {comp_s2c})"
            ),
        });
    }
    let cipher = if c2s == s2c {
        c2s
    } else {
        format!("{c2s} client->server, {s2c} server->client")
    };
    let comp = if comp_c2s == comp_s2c {
        comp_c2s
    } else {
        format!("{comp_c2s} client->server, {comp_s2c} server->client")
    };
    Ok(format!(
        "{}: cipher {cipher} (OpenSSH's default), compression {comp} at level {}",
        version.as_deref().unwrap_or("OpenSSH"),
        level.as_deref().unwrap_or("?")
    ))
}

impl SshForward {
    /// Makes keys and a config in a temporary directory, starts sshd through `server` on a free port of
    /// `server_addr`, then `ssh -C -N -L 127.0.0.1:<local>:<pg>` through `client` as root with the new
    /// key, and returns once the forward listens.
    pub fn start(
        server: &dyn Fn(&OsStr) -> Command,
        client: &dyn Fn(&OsStr) -> Command,
        server_addr: Ipv4Addr,
        pg: PgTarget,
    ) -> Result<SshForward> {
        require(SSHD, "openssh-server")?;
        require("ssh", "openssh-client")?;
        require("ssh-keygen", "openssh-client")?;
        let dir = tempfile::Builder::new()
            .prefix("pgcompress-sshd-")
            .tempdir()
            .io(|| "creating a directory for sshd's keys and config".into())?;
        let d = dir.path();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))
            .io(|| format!("setting the mode of {}", d.display()))?;
        let (host_key, client_key) = (d.join("host_ed25519"), d.join("client_ed25519"));
        keygen(&host_key)?;
        keygen(&client_key)?;
        let public = d.join("client_ed25519.pub");
        let key =
            std::fs::read_to_string(&public).io(|| format!("reading {}", public.display()))?;
        let authorized = d.join("authorized_keys");
        write_private(&authorized, &key)?;
        std::fs::create_dir_all(PRIVSEP_DIR).io(|| format!("creating {PRIVSEP_DIR}"))?;
        std::fs::set_permissions(PRIVSEP_DIR, std::fs::Permissions::from_mode(0o755))
            .io(|| format!("setting the mode of {PRIVSEP_DIR}"))?;
        let port = free_port()?;
        // StrictModes would refuse an authorized_keys file under /tmp (world-writable); this one is in a
        // root-owned 0700 directory, written 0600.
        let config = format!(
            "Port {port}\nListenAddress {server_addr}\nHostKey {}\nAuthorizedKeysFile {}\nPidFile none\n\
             UsePAM no\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n\
             PasswordAuthentication no\nKbdInteractiveAuthentication no\nStrictModes no\n\
             AllowTcpForwarding yes\nAllowStreamLocalForwarding yes\nX11Forwarding no\nPrintMotd no\n\
             Compression yes\nLogLevel INFO\n",
            host_key.display(),
            authorized.display()
        );
        let config_path = d.join("sshd_config");
        write_private(&config_path, &config)?;
        let (sshd, _) = Proc::start(
            "sshd",
            SSHD,
            server(OsStr::new(SSHD))
                .args(["-D", "-e", "-f"])
                .arg(&config_path),
            "Server listening on",
        )?;
        let mut fwd = SshForward {
            ssh: None,
            sshd: Some(sshd),
            local_port: free_port()?,
            negotiated: String::new(),
            _dir: dir,
        };
        let mut spec = OsString::from(format!("127.0.0.1:{}:", fwd.local_port));
        spec.push(pg.ssh_forward_target());
        // -v: ssh says when the forward listens and what it negotiated; -F /dev/null: no user config.
        let (ssh, lines) = Proc::start(
            "ssh -C client",
            "ssh",
            client(OsStr::new("ssh"))
                .args(["-F", "/dev/null", "-C", "-N", "-v", "-L"])
                .arg(spec)
                .arg("-p")
                .arg(port.to_string())
                .arg("-i")
                .arg(&client_key)
                .args([
                    "-o",
                    "StrictHostKeyChecking=no",
                    "-o",
                    "UserKnownHostsFile=/dev/null",
                    "-o",
                    "ExitOnForwardFailure=yes",
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    "IdentitiesOnly=yes",
                ])
                .arg(format!("root@{}", IpAddr::V4(server_addr))),
            "Local forwarding listening on",
        )?;
        fwd.ssh = Some(ssh);
        fwd.negotiated = negotiated(&lines)?;
        Ok(fwd)
    }

    /// The forward's port on 127.0.0.1 (in the client namespace): connect here as to PostgreSQL.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The ssh client and the sshd listener, labelled `ssh` and `sshd`, for CPU figures
    /// ([`tree_cpu_seconds`] counts sshd's per-connection processes too).
    pub fn pids(&self) -> Vec<(String, u32)> {
        let label = |p: &Proc| if p.label == "sshd" { "sshd" } else { "ssh" };
        [&self.ssh, &self.sshd]
            .into_iter()
            .flatten()
            .map(|p| (label(p).to_string(), p.pid()))
            .collect()
    }

    /// What ssh negotiated, for the report's notes: "OpenSSH_9.2p1 Debian-2+deb12u10: cipher
    /// chacha20-poly1305@openssh.com (OpenSSH's default), compression zlib@openssh.com at level 6".
    pub fn negotiated(&self) -> &str {
        &self.negotiated
    }
}

impl Drop for SshForward {
    fn drop(&mut self) {
        // The client first: its connection ends, and sshd's per-connection processes with it.
        for p in [self.ssh.as_mut(), self.sshd.as_mut()]
            .into_iter()
            .flatten()
        {
            p.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn negotiated_names_cipher_and_compression() {
        let l = lines(
            "OpenSSH_9.2p1 Debian-2+deb12u10, OpenSSL 3.0.19 27 Jan 2026\n\
             debug1: kex: server->client cipher: chacha20-poly1305@openssh.com MAC: <implicit> compression: zlib@openssh.com\n\
             debug1: kex: client->server cipher: chacha20-poly1305@openssh.com MAC: <implicit> compression: zlib@openssh.com\n\
             debug1: Enabling compression at level 6.\n",
        );
        assert_eq!(
            negotiated(&l).expect("negotiated"),
            "OpenSSH_9.2p1 Debian-2+deb12u10: cipher chacha20-poly1305@openssh.com (OpenSSH's default), \
             compression zlib@openssh.com at level 6"
        );
    }

    #[test]
    fn no_compression_is_not_ssh_c() {
        let l = lines(
            "debug1: kex: server->client cipher: aes128-ctr MAC: umac-64@openssh.com compression: none\n\
             debug1: kex: client->server cipher: aes128-ctr MAC: umac-64@openssh.com compression: none\n",
        );
        let e = negotiated(&l).unwrap_err().to_string();
        assert!(e.contains("compression was not negotiated"), "{e}");
        assert!(negotiated(&lines("debug1: nothing\n")).is_err());
    }
}
