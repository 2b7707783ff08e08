//! A real S3-compatible server for the tests: moto_server (Python `moto[server]`, installed by
//! scripts/setup.sh into /opt/pgcompress-venv) on a free loopback port, started per test and
//! stopped on drop, and a repository on it that the archive tests drive through the CLI.
//!
//! The tests reach the server behind pgcompress's back (bucket creation, reading and
//! damaging objects) with plain HTTP/1.1 requests. moto does not check signatures, but it
//! refuses anonymous access to existing objects, so the requests carry an Authorization
//! header with a dummy signature.

use super::{bin, Repo};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where scripts/setup.sh installs moto_server.
const VENV_MOTO: &str = "/opt/pgcompress-venv/bin/moto_server";
/// Overrides where moto_server is looked for.
const MOTO_ENV: &str = "PGCOMPRESS_MOTO_SERVER";
/// Credentials moto accepts (it checks none); always set, so that no test ever falls back
/// to looking for instance credentials.
const KEY_ID: &str = "pgcompress-test";
const SECRET: &str = "pgcompress-test-secret";

/// A running moto_server.
pub struct Moto {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Starts moto_server, or returns why it cannot. In CI (`CI=true`) that is a test
    /// failure, so callers use [`Moto::start_or_skip`].
    pub fn start() -> Result<Moto, String> {
        let exe = moto_binary().ok_or_else(|| {
            format!(
                "moto_server not found ({VENV_MOTO}, ${MOTO_ENV} or PATH); run scripts/setup.sh"
            )
        })?;
        let dir = tempfile::Builder::new()
            .prefix("pgc-moto-")
            .tempdir()
            .map_err(|e| format!("tempdir: {e}"))?;
        let mut last = String::new();
        // The port is free when asked for, but another process may take it before moto
        // binds it: try a few.
        for attempt in 0..3 {
            let port = pgtest::free_port().map_err(|e| format!("finding a free port: {e}"))?;
            let log = dir.path().join(format!("moto-{attempt}.log"));
            let out = std::fs::File::create(&log).map_err(|e| format!("log: {e}"))?;
            let err = out.try_clone().map_err(|e| format!("log: {e}"))?;
            let mut child = Command::new(&exe)
                .args(["-H", "127.0.0.1", "-p", &port.to_string()])
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err)
                .spawn()
                .map_err(|e| format!("starting {}: {e}", exe.display()))?;
            match wait_ready(&mut child, port, &log, Duration::from_secs(60)) {
                Ok(()) => {
                    return Ok(Moto {
                        child,
                        port,
                        log,
                        _dir: dir,
                    })
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = e;
                }
            }
        }
        Err(last)
    }

    /// Starts moto_server; `None` (with a message) when it cannot be started on a developer
    /// machine, a panic in CI, where a missing server must not pass as a skipped test.
    pub fn start_or_skip(test: &str) -> Option<Moto> {
        match Moto::start() {
            Ok(m) => Some(m),
            Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("{test}: cannot start the S3 test server in CI: {e}")
            }
            Err(e) => {
                eprintln!("SKIPPED {test}: cannot start the S3 test server: {e}");
                None
            }
        }
    }

    /// The last lines of the server's log, for failure messages.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }

    /// The endpoint URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket; panics unless the server says it did.
    pub fn create_bucket(&self, bucket: &str) {
        let (status, body) = self
            .request("PUT", &format!("/{bucket}"), &[], b"")
            .expect("create bucket");
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// An object's bytes, `None` when there is none.
    pub fn get_object(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let (status, body) = self
            .request("GET", &format!("/{bucket}/{key}"), &[], b"")
            .expect("get object");
        match status {
            200 => Some(body),
            404 => None,
            s => panic!("GET {bucket}/{key}: {s} {}", String::from_utf8_lossy(&body)),
        }
    }

    /// Stores an object with extra headers and returns the HTTP status.
    pub fn put_object(
        &self,
        bucket: &str,
        key: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> u16 {
        self.request("PUT", &format!("/{bucket}/{key}"), headers, body)
            .expect("put object")
            .0
    }

    fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<(u16, Vec<u8>)> {
        request(self.port, method, path, headers, body)
    }
}

/// One HTTP/1.1 request to 127.0.0.1:`port`; returns the status and the body.
fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<(u16, Vec<u8>)> {
    let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
    let mut s = TcpStream::connect_timeout(&addr.into(), Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\n\
Content-Type: application/octet-stream\r\nConnection: close\r\n\
Authorization: AWS4-HMAC-SHA256 Credential={KEY_ID}/20250101/us-east-1/s3/aws4_request, \
SignedHeaders=host, Signature=00\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    let mut resp = Vec::new();
    s.read_to_end(&mut resp)?;
    parse_response(&resp).ok_or_else(|| std::io::Error::other("malformed HTTP response"))
}

/// Waits until moto answers HTTP on `port`.
fn wait_ready(child: &mut Child, port: u16, log: &Path, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("moto_server exited ({status}): {}", log_tail(log)));
        }
        if request(port, "GET", "/", &[], b"").is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "moto_server did not answer on port {port} within {timeout:?}: {}",
                log_tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(10)..].join(" | ")
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(MOTO_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    // scripts/setup.sh installs it into $PGCOMPRESS_VENV, by default /opt/pgcompress-venv.
    if let Some(venv) = std::env::var_os("PGCOMPRESS_VENV").filter(|p| !p.is_empty()) {
        let p = Path::new(&venv).join("bin/moto_server");
        if p.is_file() {
            return Some(p);
        }
    }
    if Path::new(VENV_MOTO).is_file() {
        return Some(PathBuf::from(VENV_MOTO));
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join("moto_server"))
        .find(|p| p.is_file())
}

/// Status and body of a complete HTTP/1.1 response (Content-Length, chunked, or up to EOF).
fn parse_response(resp: &[u8]) -> Option<(u16, Vec<u8>)> {
    let end = resp.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&resp[..end]).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let mut body = resp[end + 4..].to_vec();
    let mut chunked = false;
    for l in lines {
        let (k, v) = l.split_once(':')?;
        let v = v.trim();
        if k.eq_ignore_ascii_case("content-length") {
            body.truncate(v.parse().ok()?);
        } else if k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked") {
            chunked = true;
        }
    }
    if chunked {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n")?;
            let size = usize::from_str_radix(
                std::str::from_utf8(&rest[..nl])
                    .ok()?
                    .split(';')
                    .next()?
                    .trim(),
                16,
            )
            .ok()?;
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(nl + 2..nl + 2 + size)?);
            rest = rest.get(nl + 4 + size..)?;
        }
        body = out;
    }
    Some((status, body))
}

/// A repository `s3://BUCKET/PREFIX` on a moto server, selected by flags and credentials in
/// the environment.
pub struct S3Repo<'a> {
    pub moto: &'a Moto,
    pub bucket: String,
    pub prefix: String,
    /// When set, [`Repo::command_line`] names the repository through this config file.
    pub config: Option<PathBuf>,
}

impl<'a> S3Repo<'a> {
    /// A repository in `bucket` (created if `create`) under `prefix`.
    pub fn new(moto: &'a Moto, bucket: &str, prefix: &str) -> S3Repo<'a> {
        S3Repo {
            moto,
            bucket: bucket.into(),
            prefix: prefix.into(),
            config: None,
        }
    }

    /// Writes a config file naming this repository, its endpoint and region, and uses it in
    /// [`Repo::command_line`] from now on.
    pub fn write_config(&mut self, path: &Path) {
        std::fs::write(
            path,
            format!(
                "# written by the archive tests\nrepo = \"{}\"\nendpoint = \"{}\"\nregion = \"us-east-1\"\n",
                self.url(),
                self.moto.endpoint()
            ),
        )
        .expect("write config");
        self.config = Some(path.to_path_buf());
    }

    /// `s3://bucket/prefix`.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    fn key(&self, name: &str) -> String {
        format!("{}/{name}.pgcz", self.prefix)
    }
}

/// Sets the credentials, and only them, from the environment of a pgcompress command.
pub fn credentials(cmd: &mut Command) {
    for v in [
        "PGCOMPRESS_REPO",
        "PGCOMPRESS_CONFIG",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
    ] {
        cmd.env_remove(v);
    }
    cmd.env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET);
}

impl Repo for S3Repo<'_> {
    fn apply(&self, cmd: &mut Command) {
        credentials(cmd);
        cmd.arg("--repo")
            .arg(self.url())
            .arg("--endpoint")
            .arg(self.moto.endpoint());
    }
    fn stored(&self, name: &str) -> Option<Vec<u8>> {
        self.moto.get_object(&self.bucket, &self.key(name))
    }
    fn replace(&self, name: &str, bytes: &[u8]) {
        let status = self
            .moto
            .put_object(&self.bucket, &self.key(name), &[], bytes);
        assert_eq!(status, 200, "replacing {name}");
    }
    fn missing(&self) -> Box<dyn Repo + '_> {
        Box::new(S3Repo::new(self.moto, "no-such-bucket", &self.prefix))
    }
    fn command_line(&self, sub: &str, tail: &str) -> String {
        let repo = match &self.config {
            Some(c) => format!("--config {}", c.display()),
            None => format!("--repo {} --endpoint {}", self.url(), self.moto.endpoint()),
        };
        format!(
            "env AWS_ACCESS_KEY_ID={KEY_ID} AWS_SECRET_ACCESS_KEY={SECRET} {} archive {sub} \
{repo} {tail}",
            bin().display(),
        )
    }
}
