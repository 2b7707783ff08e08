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
        match self {
            Endpoint::Tcp(addr) => {
                let s = TcpStream::connect(addr)
                    .await
                    .map_err(|e| NetError::io(format!("connecting to {addr}"), e))?;
                let _ = s.set_nodelay(true);
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
        match self {
            Endpoint::Tcp(addr) => {
                let l = TcpListener::bind(addr)
                    .await
                    .map_err(|e| NetError::Config(format!("cannot listen on {addr}: {e}")))?;
                Ok(Listener::Tcp(l))
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

/// A bound listener.
pub(crate) enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    /// The address it is bound to, for the "listening on" line.
    pub(crate) fn address(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".to_owned()),
            Listener::Unix(_, p) => p.display().to_string(),
        }
    }

    /// Accepts one connection: the stream and a name for its peer.
    pub(crate) async fn accept(&self) -> std::io::Result<(Stream, String)> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                let _ = s.set_nodelay(true);
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
