//! Where a half listens or connects: a TCP `HOST:PORT` or a Unix socket directory holding
//! `.s.PGSQL.PORT`, as PostgreSQL names its sockets.

use std::path::PathBuf;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};

use super::error::NetError;

/// A byte stream of either kind.
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A boxed stream to an application or PostgreSQL.
pub(crate) type Stream = Box<dyn Io>;

/// A TCP address or a Unix socket file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `HOST:PORT`.
    Tcp(String),
    /// The socket file (`SOCKETDIR/.s.PGSQL.PORT`).
    Unix(PathBuf),
}

impl Endpoint {
    /// Parses `HOST:PORT` or a socket directory (anything starting with `/` or `.`), whose
    /// socket file is `.s.PGSQL.<port>`.
    pub fn parse(text: &str, port: u16) -> Result<Endpoint, NetError> {
        if text.starts_with('/') || text.starts_with('.') {
            return Ok(Endpoint::Unix(
                PathBuf::from(text).join(format!(".s.PGSQL.{port}")),
            ));
        }
        match text.rsplit_once(':') {
            Some((host, p)) if !host.is_empty() && p.parse::<u16>().is_ok() => {
                Ok(Endpoint::Tcp(text.to_owned()))
            }
            _ => Err(NetError::Config(format!(
                "\"{text}\" is neither HOST:PORT nor a socket directory (an absolute path)"
            ))),
        }
    }

    /// Connects to the endpoint.
    pub(crate) async fn connect(&self) -> Result<Stream, NetError> {
        self.connect_as(Role::Local).await
    }

    /// Connects to the server half: a link socket ([`tune_link`]).
    pub(crate) async fn connect_link(&self) -> Result<Stream, NetError> {
        self.connect_as(Role::Link).await
    }

    async fn connect_as(&self, role: Role) -> Result<Stream, NetError> {
        match self {
            Endpoint::Tcp(addr) => {
                let s = TcpStream::connect(addr)
                    .await
                    .map_err(|e| NetError::io(format!("connecting to {addr}"), e))?;
                prepare(&s, role);
                Ok(Box::new(s))
            }
            Endpoint::Unix(path) => {
                let s = UnixStream::connect(path)
                    .await
                    .map_err(|e| NetError::io(format!("connecting to {}", path.display()), e))?;
                Ok(Box::new(s))
            }
        }
    }

    /// Binds a listener; a stale socket file nobody listens on is replaced.
    pub(crate) async fn bind(&self) -> Result<Listener, NetError> {
        self.bind_as(Role::Local).await
    }

    /// Binds the server half's listener for links ([`tune_link`]).
    pub(crate) async fn bind_link(&self) -> Result<Listener, NetError> {
        self.bind_as(Role::Link).await
    }

    async fn bind_as(&self, role: Role) -> Result<Listener, NetError> {
        match self {
            Endpoint::Tcp(addr) => {
                let l = TcpListener::bind(addr)
                    .await
                    .map_err(|e| NetError::Config(format!("cannot listen on {addr}: {e}")))?;
                Ok(Listener::Tcp(l, role))
            }
            Endpoint::Unix(path) => {
                if path.exists() && UnixStream::connect(path).await.is_err() {
                    let _ = std::fs::remove_file(path);
                }
                let l = UnixListener::bind(path).map_err(|e| {
                    NetError::Config(format!("cannot listen on {}: {e}", path.display()))
                })?;
                // Like PostgreSQL's default unix_socket_permissions: any local user may
                // connect (authentication is PostgreSQL's job).
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
                    .map_err(|e| NetError::Config(format!("{}: {e}", path.display())))?;
                Ok(Listener::Unix(l, path.clone()))
            }
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(a) => f.write_str(a),
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// What a TCP socket carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// PostgreSQL's protocol, to an application or a server on this side.
    Local,
    /// The link between the two halves.
    Link,
}

/// Unsent bytes a link socket may hold (`TCP_NOTSENT_LOWAT`).
pub(crate) const LINK_UNSENT: u32 = 128 * 1024;

/// Keeps a link socket's unsent bytes under [`LINK_UNSENT`] (bytes in flight still grow with
/// the path). With the kernel's default, a socket takes up to 4 MiB of compressed bytes before
/// a write waits: on a slow link that is seconds of traffic compressed at whatever level was
/// in use, and `--method auto` sees the link as the limit only once it is full. Kept small, the
/// pump waits as soon as the link does, and what waits is PostgreSQL's bytes, not yet
/// compressed.
fn tune_link(s: &TcpStream) {
    let _ = socket2::SockRef::from(s).set_tcp_notsent_lowat(LINK_UNSENT);
}

/// Sets up a TCP socket just connected or accepted: no Nagle delay (messages are flushed
/// whole), and a link's few unsent bytes.
fn prepare(s: &TcpStream, role: Role) {
    let _ = s.set_nodelay(true);
    if role == Role::Link {
        tune_link(s);
    }
}

/// A bound listener.
pub(crate) enum Listener {
    Tcp(TcpListener, Role),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// The address it is bound to, for the "listening on" line.
    pub(crate) fn address(&self) -> String {
        match self {
            Listener::Tcp(l, _) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".to_owned()),
            Listener::Unix(_, p) => p.display().to_string(),
        }
    }

    /// Accepts one connection: the stream and a name for its peer.
    pub(crate) async fn accept(&self) -> std::io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l, role) => {
                let (s, peer) = l.accept().await?;
                prepare(&s, *role);
                Ok((Box::new(s) as Stream, peer.to_string()))
            }
            Listener::Unix(l, p) => {
                let (s, _) = l.accept().await?;
                Ok((Box::new(s) as Stream, format!("unix:{}", p.display())))
            }
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ends of a link hold few unsent bytes; the sockets to PostgreSQL and to the
    /// applications keep the kernel's default.
    #[tokio::test]
    async fn link_sockets_hold_few_unsent_bytes_and_local_ones_the_default() {
        let unsent = |s: &TcpStream| {
            socket2::SockRef::from(s)
                .tcp_notsent_lowat()
                .expect("TCP_NOTSENT_LOWAT")
        };
        for role in [Role::Link, Role::Local] {
            let listener = Endpoint::Tcp("127.0.0.1:0".into())
                .bind_as(role)
                .await
                .expect("bind");
            let Listener::Tcp(l, _) = &listener else {
                unreachable!("a TCP endpoint binds a TCP listener")
            };
            let addr = l.local_addr().expect("address").to_string();
            let dialed = TcpStream::connect(&addr).await.expect("connect");
            let (accepted, _) = l.accept().await.expect("accept");
            prepare(&dialed, role);
            prepare(&accepted, role);
            let want = match role {
                Role::Link => LINK_UNSENT,
                // Never set: the kernel's default applies.
                Role::Local => 0,
            };
            assert_eq!(
                (unsent(&dialed), unsent(&accepted)),
                (want, want),
                "{role:?}"
            );
            assert!(dialed.nodelay().expect("nodelay") && accepted.nodelay().expect("nodelay"));
        }
    }
}
