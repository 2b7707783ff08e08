//! The repository API called from async code: from inside a tokio runtime, on its thread
//! and on its blocking pool. The S3 store used to block on a private runtime of its own,
//! which panics ("Cannot start a runtime from within a runtime") when the caller is already
//! inside one; the local store must work there too.
//!
//! The S3 half runs against moto_server (installed by scripts/setup.sh into
//! /opt/pgcompress-venv, or `$PGCOMPRESS_MOTO_SERVER`); without it, it is skipped with a
//! message, unless `CI` is set, where that is a failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use archive::{Location, PushOutcome, Repository, S3Options};
use codec::Spec;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A file of `n` bytes that compresses a little.
fn sample(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i * 31 % 251) as u8 ^ (i / 4096) as u8)
        .collect()
}

/// Pushes `src` as `name`, gets it back, lists and verifies, all from inside a runtime:
/// directly on the runtime's thread, then through `spawn_blocking`.
fn drive(repo: Repository, src: &Path, name: &str, out: &Path) {
    let spec: Spec = "zstd:level=3".parse().expect("spec");
    let data = std::fs::read(src).expect("read source");
    repo.init(&archive::Identity {
        system_identifier: 7_000_000_000_000_000_002,
        wal_segment_size: 16 << 20,
        pg_major: 15,
    })
    .expect("init");
    let repo = std::sync::Arc::new(repo);
    runtime().block_on(async {
        let outcome = repo.push(src, name, &spec).expect("push inside a runtime");
        assert!(matches!(outcome, PushOutcome::Stored(_)), "{outcome:?}");
        repo.get(name, out).expect("get inside a runtime");
        assert!(std::fs::read(out).expect("read restored") == data);
        std::fs::remove_file(out).expect("rm");
        let names: Vec<String> = repo
            .list()
            .expect("list inside a runtime")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(names, [name]);
        // The way async code should call it: on the blocking pool.
        let (r, src, out2) = (repo.clone(), src.to_owned(), out.to_owned());
        let name2 = name.to_owned();
        let again = tokio::task::spawn_blocking(move || {
            let outcome = r
                .push(&src, &name2, &spec)
                .expect("push on the blocking pool");
            r.get(&name2, &out2).expect("get on the blocking pool");
            r.verify_one(&name2).expect("verify on the blocking pool");
            outcome
        })
        .await
        .expect("blocking task");
        assert!(
            matches!(again, PushOutcome::AlreadyArchived(_)),
            "{again:?}"
        );
        assert!(std::fs::read(out).expect("read restored") == data);
    });
}

#[test]
fn the_local_repository_works_inside_a_runtime() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("f");
    std::fs::write(&src, sample(300_000)).expect("write");
    drive(
        Repository::local(dir.path().join("repo")),
        &src,
        "00000002.history",
        &dir.path().join("out"),
    );
}

#[test]
fn the_s3_repository_works_inside_a_runtime() {
    let Some(moto) = Moto::start() else {
        return;
    };
    moto.create_bucket("pgc-async");
    // The S3 client takes credentials from the environment; moto accepts any.
    std::env::set_var("AWS_ACCESS_KEY_ID", "pgcompress-test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "pgcompress-test-secret");
    let location = Location::parse("s3://pgc-async/wal").expect("location");
    let opts = S3Options {
        endpoint: Some(format!("http://127.0.0.1:{}", moto.port)),
        region: None,
    };
    let repo = Repository::open(&location, &opts).expect("open");
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("f");
    std::fs::write(&src, sample(300_000)).expect("write");
    drive(repo, &src, "00000003.history", &dir.path().join("out"));
}

/// moto_server on a free loopback port, killed on drop.
struct Moto {
    child: Child,
    port: u16,
}

impl Moto {
    fn start() -> Option<Moto> {
        let exe = std::env::var_os("PGCOMPRESS_MOTO_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/opt/pgcompress-venv/bin/moto_server"));
        if !exe.exists() {
            assert!(
                std::env::var_os("CI").is_none(),
                "moto_server not found at {}",
                exe.display()
            );
            eprintln!(
                "skipped: moto_server not found at {} (scripts/setup.sh)",
                exe.display()
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(&exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Moto { child, port };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(moto)
    }

    /// `PUT /bucket` with a dummy signature (moto checks none, but wants one).
    fn create_bucket(&self, bucket: &str) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        write!(
            s,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: AWS4-HMAC-SHA256 \
             Credential=pgcompress-test/20260101/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=00\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .expect("send");
        let mut reply = String::new();
        s.read_to_string(&mut reply).expect("reply");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
