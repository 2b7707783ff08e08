//! The S3-compatible server of the sustained run: moto_server (Python's `moto[server]`, which
//! scripts/setup.sh installs into its venv) on a free loopback port, started per run and killed on
//! drop. pgcompress talks plain HTTP to it. pgBackRest speaks only HTTPS to S3: its server sits behind
//! socat terminating TLS with a self-signed certificate made here (pgBackRest is told not to verify it).
//! moto's own `--ssl` does not do: it ends connections without a TLS close_notify, which pgBackRest's
//! OpenSSL 3 reports as an error. Buckets are created and measured through the boto3 moto ships with.

use crate::error::{Error, Result};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The credentials both tools are given (moto checks none, but both tools insist on some).
pub(super) const KEY_ID: &str = "pgcompress-bench";
pub(super) const SECRET: &str = "pgcompress-bench-secret";

/// How long moto may take to answer its first request.
const READY_LIMIT: Duration = Duration::from_secs(60);

/// One script for the bucket operations: `create BUCKET` or `usage BUCKET` (prints the bytes of
/// every object and the number of objects named after a WAL segment).
const BUCKET_SCRIPT: &str = r#"
import re, sys, boto3, urllib3
urllib3.disable_warnings()
endpoint, op, bucket, key, secret = sys.argv[1:6]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=key, aws_secret_access_key=secret, verify=False)
if op == "create":
    s3.create_bucket(Bucket=bucket)
else:
    size = segments = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for o in page.get("Contents", []):
            size += o["Size"]
            name = o["Key"].rsplit("/", 1)[-1]
            if re.fullmatch(r"[0-9A-F]{24}[.-].*", name) and ".partial" not in name and ".backup" not in name:
                segments += 1
    print(size, segments)
"#;

/// A running moto_server, and the socat in front of it when it serves HTTPS.
pub(super) struct S3Server {
    child: Child,
    tls_front: Option<Child>,
    port: u16,
    tls: bool,
    python: PathBuf,
    /// Holds the certificate socat serves; removed on drop.
    dir: tempfile::TempDir,
}

fn failed(what: &str, reason: impl Into<String>) -> Error {
    Error::S3Server {
        what: what.into(),
        reason: reason.into(),
    }
}

/// The venv scripts/setup.sh creates ($PGCOMPRESS_VENV, else /opt/pgcompress-venv).
fn venv() -> PathBuf {
    std::env::var_os("PGCOMPRESS_VENV")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/opt/pgcompress-venv"), PathBuf::from)
}

impl S3Server {
    /// Starts moto_server on a free port (HTTPS when `tls`) and waits until it answers.
    pub(super) fn start(tls: bool) -> Result<S3Server> {
        let bin = venv().join("bin");
        let moto = bin.join("moto_server");
        if !moto.exists() {
            return Err(failed(
                "starting the S3-compatible server",
                format!("{} is missing; run scripts/setup.sh", moto.display()),
            ));
        }
        let dir = tempfile::Builder::new()
            .prefix("pgcompress-bench-s3-")
            .tempdir()
            .map_err(|e| failed("creating a temporary directory", e.to_string()))?;
        let free = || pgtest::free_port().map_err(|e| failed("finding a free port", e.to_string()));
        let moto_port = free()?;
        let child = Command::new(&moto)
            .args(["-H", "127.0.0.1", "-p", &moto_port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| failed("starting moto_server", e.to_string()))?;
        let mut server = S3Server {
            child,
            tls_front: None,
            port: moto_port,
            tls,
            python: bin.join("python"),
            dir,
        };
        wait_listening(moto_port)?;
        if tls {
            let pem = server.dir.path().join("server.pem");
            self_signed(&pem)?;
            let port = free()?;
            let front = Command::new("socat")
                .arg(format!(
                    "OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={},verify=0",
                    pem.display()
                ))
                .arg(format!("TCP:127.0.0.1:{moto_port}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| failed("starting socat in front of moto_server", e.to_string()))?;
            server.tls_front = Some(front);
            server.port = port;
            wait_listening(port)?;
        }
        Ok(server)
    }

    /// `http://127.0.0.1:PORT` (`https` with TLS).
    pub(super) fn endpoint(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port it listens on.
    pub(super) fn port(&self) -> u16 {
        self.port
    }

    fn bucket_op(&self, op: &str, bucket: &str) -> Result<String> {
        let out = Command::new(&self.python)
            .args([
                "-c",
                BUCKET_SCRIPT,
                &self.endpoint(),
                op,
                bucket,
                KEY_ID,
                SECRET,
            ])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| failed(&format!("{op} bucket {bucket}"), e.to_string()))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(failed(
                &format!("{op} bucket {bucket}"),
                err.lines().last().unwrap_or("no message").to_owned(),
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Creates `bucket`.
    pub(super) fn create_bucket(&self, bucket: &str) -> Result<()> {
        self.bucket_op("create", bucket).map(drop)
    }

    /// The bytes `bucket` holds and how many of its objects are WAL segments.
    pub(super) fn usage(&self, bucket: &str) -> Result<(u64, u64)> {
        let text = self.bucket_op("usage", bucket)?;
        let mut it = text.split_whitespace().map(str::parse::<u64>);
        match (it.next(), it.next()) {
            (Some(Ok(bytes)), Some(Ok(segments))) => Ok((bytes, segments)),
            _ => Err(failed(
                &format!("measuring bucket {bucket}"),
                format!("unexpected answer {text:?}"),
            )),
        }
    }
}

/// Waits until something accepts connections on `port`.
fn wait_listening(port: u16) -> Result<()> {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if started.elapsed() > READY_LIMIT {
            return Err(failed(
                "starting the S3-compatible server",
                format!("nothing listened on port {port} after {READY_LIMIT:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// Writes a key and a self-signed certificate for 127.0.0.1 into one PEM file (what socat reads).
fn self_signed(pem: &Path) -> Result<()> {
    let key = pem.with_extension("key");
    let cert = pem.with_extension("crt");
    let out = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args(["-subj", "/CN=127.0.0.1", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed("making a certificate with openssl", e.to_string()))?;
    if !out.status.success() {
        return Err(failed(
            "making a certificate with openssl",
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    let mut both = std::fs::read(&key).map_err(|e| failed("reading the key", e.to_string()))?;
    both.extend(
        std::fs::read(&cert).map_err(|e| failed("reading the certificate", e.to_string()))?,
    );
    std::fs::write(pem, both).map_err(|e| failed("writing the PEM file", e.to_string()))
}

impl Drop for S3Server {
    fn drop(&mut self) {
        if let Some(front) = &mut self.tls_front {
            // socat forks a child per connection: end the whole group.
            let _ = Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", front.id())])
                .status();
            let _ = front.wait();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
