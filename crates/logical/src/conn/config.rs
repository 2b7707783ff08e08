//! Connection settings as libpq takes them (`libpq.sgml` "Connection Strings" and
//! "Environment Variables"): a `key=value` conninfo string or a `postgresql://` URI, with
//! `PGHOST`, `PGHOSTADDR`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGPASSFILE`,
//! `PGCONNECT_TIMEOUT` and the TLS variables (`PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT`,
//! `PGSSLKEY`, `PGCHANNELBINDING`) filling what the string leaves out, and the password file
//! (`~/.pgpass`) as the last resort for a password.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::ConnError;

/// libpq's default Unix socket directory on Debian and Ubuntu builds (`DEFAULT_PGSOCKET_DIR`).
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";
/// PostgreSQL's default port.
pub const DEFAULT_PORT: u16 = 5432;

/// Where to connect: a TCP host or a Unix socket directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A host name or address, reached over TCP.
    Tcp(String),
    /// A directory holding the server's `.s.PGSQL.<port>` socket.
    Unix(PathBuf),
}

/// The shortest `connect_timeout` libpq honours: 1 s is taken as 2 s (`fe-connect.c`), so a
/// timer's granularity cannot end a connection attempt at once.
pub const MIN_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything needed to open a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnConfig {
    /// Where the server is, by name: the name a `verify-full` certificate must carry and the
    /// password file is searched for. `Host::Tcp("")` when only `hostaddr` was given.
    pub host: Host,
    /// `hostaddr`: the address to connect to instead of looking `host` up (a TCP connection
    /// even when `host` is a socket directory), as in libpq.
    pub hostaddr: Option<IpAddr>,
    /// `connect_timeout` (or `PGCONNECT_TIMEOUT`): the longest one attempt to connect and log
    /// in may take, per address tried; `None` waits as long as it takes (0, negative or unset,
    /// as in libpq), and less than 2 s is 2 s.
    pub connect_timeout: Option<Duration>,
    /// Its port (for Unix sockets, it names the socket file).
    pub port: u16,
    /// The role to log in as.
    pub user: String,
    /// The database (logical replication decodes one database).
    pub dbname: String,
    /// The password, when one was given or found in the password file.
    pub password: Option<String>,
    /// `application_name`, shown in `pg_stat_replication`.
    pub application_name: String,
    /// TLS and channel binding (`sslmode`, `sslrootcert`, `sslcert`, `sslkey`,
    /// `channel_binding`); unused on Unix sockets, which never use TLS (as in libpq).
    pub tls: TlsConfig,
}

/// libpq's `sslmode` (`libpq.sgml` "Protection Provided in Different Modes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// Without TLS first; with TLS when the server refuses that.
    Allow,
    /// With TLS first, falling back to none when the server does not speak it or the TLS
    /// attempt fails (libpq's default).
    Prefer,
    /// TLS only; the certificate chain is checked only when the root certificate file exists.
    Require,
    /// TLS only; the certificate chain must verify against the root certificate(s).
    VerifyCa,
    /// As `VerifyCa`, and the certificate must name the host connected to.
    VerifyFull,
}

impl SslMode {
    fn parse(s: &str) -> Result<Self, ConnError> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(ConnError::Config(format!(
                    "invalid sslmode \"{other}\": use disable, allow, prefer, require, verify-ca or verify-full"
                )))
            }
        })
    }

    /// The name as libpq spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// libpq's `channel_binding`: whether SCRAM binds the login to the TLS connection
/// (SCRAM-SHA-256-PLUS with `tls-server-end-point`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelBindingMode {
    /// Never.
    Disable,
    /// When TLS is on and the server offers SCRAM-SHA-256-PLUS (libpq's default).
    Prefer,
    /// Always: any other way to log in is refused.
    Require,
}

impl ChannelBindingMode {
    fn parse(s: &str) -> Result<Self, ConnError> {
        Ok(match s {
            "disable" => ChannelBindingMode::Disable,
            "prefer" => ChannelBindingMode::Prefer,
            "require" => ChannelBindingMode::Require,
            other => {
                return Err(ConnError::Config(format!(
                    "invalid channel_binding \"{other}\": use disable, prefer or require"
                )))
            }
        })
    }
}

/// Where the trusted root certificates come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more certificates (it may not exist: then nothing is trusted,
    /// which is an error only for verify-ca and verify-full).
    File(PathBuf),
    /// The system's trusted roots (`sslrootcert=system`, which makes verify-full the
    /// default and the only mode allowed, as in libpq).
    System,
}

/// The TLS half of a [`ConnConfig`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// `sslmode`, default prefer.
    pub mode: SslMode,
    /// `sslrootcert`, default `~/.postgresql/root.crt`.
    pub root_cert: Option<RootCert>,
    /// `sslcert`, default `~/.postgresql/postgresql.crt`; sent when the file exists.
    pub cert: Option<PathBuf>,
    /// `sslkey`, default `~/.postgresql/postgresql.key`.
    pub key: Option<PathBuf>,
    /// `channel_binding`, default prefer.
    pub channel_binding: ChannelBindingMode,
}

impl Default for TlsConfig {
    /// libpq's defaults without a home directory: prefer TLS, trust nothing, no client
    /// certificate, bind the channel when possible.
    fn default() -> Self {
        TlsConfig {
            mode: SslMode::Prefer,
            root_cert: None,
            cert: None,
            key: None,
            channel_binding: ChannelBindingMode::Prefer,
        }
    }
}

/// The environment a [`ConnConfig`] falls back on; [`Env::from_process`] reads the real one,
/// tests build their own.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `PGHOST`
    pub host: Option<String>,
    /// `PGHOSTADDR`
    pub hostaddr: Option<String>,
    /// `PGCONNECT_TIMEOUT`
    pub connect_timeout: Option<String>,
    /// `PGPORT`
    pub port: Option<String>,
    /// `PGUSER`
    pub user: Option<String>,
    /// `PGDATABASE`
    pub dbname: Option<String>,
    /// `PGPASSWORD`
    pub password: Option<String>,
    /// `PGPASSFILE`
    pub passfile: Option<String>,
    /// `PGAPPNAME`
    pub application_name: Option<String>,
    /// `PGSSLMODE`
    pub sslmode: Option<String>,
    /// `PGSSLROOTCERT`
    pub sslrootcert: Option<String>,
    /// `PGSSLCERT`
    pub sslcert: Option<String>,
    /// `PGSSLKEY`
    pub sslkey: Option<String>,
    /// `PGCHANNELBINDING`
    pub channel_binding: Option<String>,
    /// The login name (`USER`), libpq's default user.
    pub os_user: Option<String>,
    /// `HOME`, for `~/.pgpass`.
    pub home: Option<String>,
}

impl Env {
    /// The process environment.
    pub fn from_process() -> Self {
        let v = |k: &str| std::env::var(k).ok().filter(|s| !s.is_empty());
        Env {
            host: v("PGHOST"),
            hostaddr: v("PGHOSTADDR"),
            connect_timeout: v("PGCONNECT_TIMEOUT"),
            port: v("PGPORT"),
            user: v("PGUSER"),
            dbname: v("PGDATABASE"),
            password: v("PGPASSWORD"),
            passfile: v("PGPASSFILE"),
            application_name: v("PGAPPNAME"),
            sslmode: v("PGSSLMODE"),
            sslrootcert: v("PGSSLROOTCERT"),
            sslcert: v("PGSSLCERT"),
            sslkey: v("PGSSLKEY"),
            channel_binding: v("PGCHANNELBINDING"),
            os_user: v("USER").or_else(|| v("LOGNAME")),
            home: v("HOME"),
        }
    }
}

#[derive(Default)]
struct Raw {
    host: Option<String>,
    hostaddr: Option<String>,
    connect_timeout: Option<String>,
    port: Option<String>,
    user: Option<String>,
    dbname: Option<String>,
    password: Option<String>,
    passfile: Option<String>,
    application_name: Option<String>,
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    sslcert: Option<String>,
    sslkey: Option<String>,
    channel_binding: Option<String>,
}

impl Raw {
    fn set(&mut self, key: &str, value: String) -> Result<(), ConnError> {
        let slot = match key {
            "host" => &mut self.host,
            "hostaddr" => &mut self.hostaddr,
            "connect_timeout" => &mut self.connect_timeout,
            "port" => &mut self.port,
            "user" => &mut self.user,
            "dbname" => &mut self.dbname,
            "password" => &mut self.password,
            "passfile" => &mut self.passfile,
            "application_name" => &mut self.application_name,
            "sslmode" => &mut self.sslmode,
            "sslrootcert" => &mut self.sslrootcert,
            "sslcert" => &mut self.sslcert,
            "sslkey" => &mut self.sslkey,
            "channel_binding" => &mut self.channel_binding,
            // This client has no GSSAPI: without it is what disable and prefer end in.
            "gssencmode" if matches!(value.as_str(), "disable" | "prefer") => return Ok(()),
            "gssencmode" | "sslcrl" | "sslcrldir" | "sslpassword" | "requirepeer"
            | "krbsrvname" | "gsslib" | "sslnegotiation" => {
                return Err(ConnError::Config(format!(
                    "{key}={value}: this client does not support {key}; leave it out"
                )))
            }
            // Accepted and ignored.
            "client_encoding"
            | "options"
            | "fallback_application_name"
            | "keepalives"
            | "keepalives_idle"
            | "keepalives_interval"
            | "keepalives_count"
            | "target_session_attrs"
            | "replication" => return Ok(()),
            other => {
                return Err(ConnError::Config(format!(
                    "unknown connection option \"{other}\""
                )))
            }
        };
        *slot = Some(value);
        Ok(())
    }
}

impl ConnConfig {
    /// Parses `conninfo` (empty, `key=value …`, or a `postgresql://` / `postgres://` URI) and
    /// fills the gaps from `env` and the password file.
    pub fn parse(conninfo: &str, env: &Env) -> Result<Self, ConnError> {
        let s = conninfo.trim();
        let raw = if s.starts_with("postgresql://") || s.starts_with("postgres://") {
            parse_uri(s)?
        } else {
            parse_keywords(s)?
        };
        let tls = tls_config(&raw, env)?;
        let hostaddr = match raw.hostaddr.or_else(|| env.hostaddr.clone()) {
            None => None,
            Some(a) => {
                refuse_list("hostaddr", &a)?;
                Some(a.trim().parse::<IpAddr>().map_err(|_| {
                    ConnError::Config(format!(
                        "invalid hostaddr \"{a}\": it takes a numeric IPv4 or IPv6 address; \
                         give a name as host="
                    ))
                })?)
            }
        };
        let host_s = raw.host.or_else(|| env.host.clone());
        if let Some(h) = &host_s {
            refuse_list("host", h)?;
        }
        let host = match host_s {
            Some(h) if h.starts_with('/') => Host::Unix(PathBuf::from(&h)),
            Some(h) => Host::Tcp(h),
            // With only an address there is no name to verify a certificate against.
            None if hostaddr.is_some() => Host::Tcp(String::new()),
            None => Host::Unix(PathBuf::from(DEFAULT_SOCKET_DIR)),
        };
        let connect_timeout = match raw.connect_timeout.or_else(|| env.connect_timeout.clone()) {
            None => None,
            Some(t) => connect_timeout(&t)?,
        };
        let port = match raw.port.or_else(|| env.port.clone()) {
            None => DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| ConnError::Config(format!("invalid port \"{p}\"")))?,
        };
        let user = raw
            .user
            .or_else(|| env.user.clone())
            .or_else(|| env.os_user.clone())
            .ok_or_else(|| ConnError::Config("no user name: give user= or set PGUSER".into()))?;
        let dbname = raw
            .dbname
            .or_else(|| env.dbname.clone())
            .unwrap_or_else(|| user.clone());
        let mut config = ConnConfig {
            host,
            hostaddr,
            connect_timeout,
            port,
            user,
            dbname,
            password: raw.password.or_else(|| env.password.clone()),
            application_name: raw
                .application_name
                .or_else(|| env.application_name.clone())
                .unwrap_or_else(|| "pgcompress".to_owned()),
            tls,
        };
        if config.password.is_none() {
            let file = raw
                .passfile
                .or_else(|| env.passfile.clone())
                .map(PathBuf::from)
                .or_else(|| env.home.as_ref().map(|h| Path::new(h).join(".pgpass")));
            if let Some(file) = file {
                // A missing or unreadable password file is not an error, as in libpq.
                if let Ok(text) = std::fs::read_to_string(&file) {
                    config.password = config.passfile_lookup(&text);
                }
            }
        }
        Ok(config)
    }

    /// The password of the first matching `host:port:database:user:password` line
    /// (`*` matches anything, `\` escapes `:` and `\`); Unix sockets match `localhost`.
    pub fn passfile_lookup(&self, text: &str) -> Option<String> {
        // libpq (`fe-connect.c`): the name, else the address, else localhost for a socket.
        let addr = self.hostaddr.map(|a| a.to_string());
        let host = match (&self.host, &addr) {
            (Host::Tcp(h), Some(a)) if h.is_empty() => a.as_str(),
            (Host::Tcp(h), _) => h.as_str(),
            (Host::Unix(_), Some(a)) => a.as_str(),
            (Host::Unix(_), None) => "localhost",
        };
        let port = self.port.to_string();
        let want = [
            host,
            port.as_str(),
            self.dbname.as_str(),
            self.user.as_str(),
        ];
        for line in text.lines() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let fields = split_passfile_line(line);
            if fields.len() < 5 {
                continue;
            }
            if want
                .iter()
                .zip(&fields)
                .all(|(w, f)| f.as_str() == "*" || f.as_str() == *w)
            {
                return Some(fields[4].clone());
            }
        }
        None
    }

    /// The socket file for a Unix host (none when `hostaddr` makes it TCP).
    pub fn socket_path(&self) -> Option<PathBuf> {
        match &self.host {
            Host::Unix(dir) if self.hostaddr.is_none() => {
                Some(dir.join(format!(".s.PGSQL.{}", self.port)))
            }
            _ => None,
        }
    }

    /// The name a certificate must carry under `verify-full`: `host` when it is a TCP name or
    /// address (never `hostaddr`), `None` when there is none.
    pub fn tls_name(&self) -> Option<&str> {
        match &self.host {
            Host::Tcp(h) if !h.is_empty() => Some(h),
            _ => None,
        }
    }
}

/// libpq's `connect_timeout`: whole seconds; zero or negative waits forever; under 2 is 2.
fn connect_timeout(s: &str) -> Result<Option<Duration>, ConnError> {
    let secs: i64 = s.trim().parse().map_err(|_| {
        ConnError::Config(format!(
            "invalid connect_timeout \"{s}\": give whole seconds, like connect_timeout=10 \
             (0 waits forever)"
        ))
    })?;
    Ok((secs > 0).then(|| Duration::from_secs(secs as u64).max(MIN_CONNECT_TIMEOUT)))
}

/// libpq takes comma-separated lists of hosts and tries each in turn; this client connects
/// to one, and says so rather than look the whole list up as one name.
fn refuse_list(key: &str, value: &str) -> Result<(), ConnError> {
    if value.contains(',') {
        return Err(ConnError::Config(format!(
            "{key}={value}: this client connects to one host; give one {key}"
        )));
    }
    Ok(())
}

/// The TLS settings: the string, then the environment, then libpq's defaults (files under
/// `~/.postgresql`).
fn tls_config(raw: &Raw, env: &Env) -> Result<TlsConfig, ConnError> {
    let pick = |r: &Option<String>, e: &Option<String>| r.clone().or_else(|| e.clone());
    let in_home = |name: &str| {
        env.home
            .as_ref()
            .map(|h| Path::new(h).join(".postgresql").join(name))
    };
    let root_cert = match pick(&raw.sslrootcert, &env.sslrootcert) {
        Some(s) if s == "system" => Some(RootCert::System),
        Some(s) => Some(RootCert::File(PathBuf::from(s))),
        None => in_home("root.crt").map(RootCert::File),
    };
    let mode = match pick(&raw.sslmode, &env.sslmode) {
        Some(m) => SslMode::parse(&m)?,
        None if root_cert == Some(RootCert::System) => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if root_cert == Some(RootCert::System) && mode != SslMode::VerifyFull {
        // Anyone can get a publicly trusted certificate for a name they control: with the
        // system's roots only the host name check means anything (libpq refuses too).
        return Err(ConnError::Config(format!(
            "sslrootcert=system needs sslmode=verify-full, not {}",
            mode.as_str()
        )));
    }
    let channel_binding = match pick(&raw.channel_binding, &env.channel_binding) {
        Some(c) => ChannelBindingMode::parse(&c)?,
        None => ChannelBindingMode::Prefer,
    };
    Ok(TlsConfig {
        mode,
        root_cert,
        cert: pick(&raw.sslcert, &env.sslcert)
            .map(PathBuf::from)
            .or_else(|| in_home("postgresql.crt")),
        key: pick(&raw.sslkey, &env.sslkey)
            .map(PathBuf::from)
            .or_else(|| in_home("postgresql.key")),
        channel_binding,
    })
}

fn split_passfile_line(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut cur = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => cur.extend(chars.next()),
            ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    fields.push(cur);
    fields
}

fn parse_keywords(s: &str) -> Result<Raw, ConnError> {
    let mut raw = Raw::default();
    let mut it = s.chars().peekable();
    loop {
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        if it.peek().is_none() {
            return Ok(raw);
        }
        let mut key = String::new();
        while let Some(&c) = it.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            it.next();
        }
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        if it.next() != Some('=') {
            return Err(ConnError::Config(format!(
                "missing \"=\" after \"{key}\" in connection info string"
            )));
        }
        while it.peek().is_some_and(|c| c.is_whitespace()) {
            it.next();
        }
        let mut value = String::new();
        if it.peek() == Some(&'\'') {
            it.next();
            loop {
                match it.next() {
                    None => {
                        return Err(ConnError::Config(
                            "unterminated quoted string in connection info string".into(),
                        ))
                    }
                    Some('\\') => value.extend(it.next()),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = it.peek() {
                if c.is_whitespace() {
                    break;
                }
                it.next();
                if c == '\\' {
                    value.extend(it.next());
                } else {
                    value.push(c);
                }
            }
        }
        raw.set(&key, value)?;
    }
}

fn percent_decode(s: &str) -> Result<String, ConnError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| ConnError::Config(format!("invalid percent-encoding in \"{s}\"")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ConnError::Config(format!("\"{s}\" is not UTF-8")))
}

fn parse_uri(s: &str) -> Result<Raw, ConnError> {
    let mut raw = Raw::default();
    let rest = s.split_once("://").map_or("", |(_, r)| r);
    let (main, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = main.split_once('/').unwrap_or((main, ""));
    let hostport = match authority.rsplit_once('@') {
        Some((userinfo, hp)) => {
            let (u, p) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            if !u.is_empty() {
                raw.user = Some(percent_decode(u)?);
            }
            if userinfo.contains(':') {
                raw.password = Some(percent_decode(p)?);
            }
            hp
        }
        None => authority,
    };
    let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
        let (h, after) = v6
            .split_once(']')
            .ok_or_else(|| ConnError::Config(format!("unterminated IPv6 address in \"{s}\"")))?;
        (h.to_owned(), after.strip_prefix(':').unwrap_or(""))
    } else {
        let (h, p) = hostport.split_once(':').unwrap_or((hostport, ""));
        (percent_decode(h)?, p)
    };
    if !host.is_empty() {
        raw.host = Some(host);
    }
    if !port.is_empty() {
        raw.port = Some(port.to_owned());
    }
    if !path.is_empty() {
        raw.dbname = Some(percent_decode(path)?);
    }
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once('=')
            .ok_or_else(|| ConnError::Config(format!("URI parameter \"{pair}\" has no \"=\"")))?;
        raw.set(&percent_decode(k)?, percent_decode(v)?)?;
    }
    Ok(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            os_user: Some("me".into()),
            ..Env::default()
        }
    }

    #[test]
    fn keywords_with_quotes_and_defaults() {
        let c = ConnConfig::parse(
            "host=/tmp/s port = 6543 dbname='my db' password='a\\'b'",
            &env(),
        )
        .unwrap();
        assert_eq!(c.host, Host::Unix("/tmp/s".into()));
        assert_eq!(c.port, 6543);
        assert_eq!(c.user, "me");
        assert_eq!(c.dbname, "my db");
        assert_eq!(c.password.as_deref(), Some("a'b"));
        assert_eq!(c.socket_path().unwrap(), Path::new("/tmp/s/.s.PGSQL.6543"));
    }

    #[test]
    fn uri_with_everything() {
        let c = ConnConfig::parse(
            "postgresql://al%40x:p%3Aw@db.example:5433/sales?application_name=cdc",
            &env(),
        )
        .unwrap();
        assert_eq!(c.host, Host::Tcp("db.example".into()));
        assert_eq!(c.port, 5433);
        assert_eq!(c.user, "al@x");
        assert_eq!(c.password.as_deref(), Some("p:w"));
        assert_eq!(c.dbname, "sales");
        assert_eq!(c.application_name, "cdc");
        let c = ConnConfig::parse("postgres://[::1]:7/d?host=%2Ftmp", &env()).unwrap();
        assert_eq!(c.host, Host::Unix("/tmp".into()));
        assert_eq!(c.port, 7);
    }

    #[test]
    fn environment_fills_gaps() {
        let e = Env {
            host: Some("h".into()),
            port: Some("1".into()),
            user: Some("u".into()),
            dbname: Some("d".into()),
            password: Some("pw".into()),
            ..env()
        };
        let c = ConnConfig::parse("", &e).unwrap();
        assert_eq!(
            (c.host, c.port, c.user.as_str(), c.dbname.as_str()),
            (Host::Tcp("h".into()), 1, "u", "d")
        );
        assert_eq!(c.password.as_deref(), Some("pw"));
        let c = ConnConfig::parse("user=x", &env()).unwrap();
        assert_eq!((c.dbname.as_str(), c.port), ("x", DEFAULT_PORT));
    }

    #[test]
    fn bad_strings_are_errors() {
        for s in [
            "host",
            "bogus=1",
            "port=x",
            "dbname='open",
            "sslmode=strict",
            "gssencmode=require",
            "sslcrl=/crl.pem",
            "channel_binding=maybe",
            "sslrootcert=system sslmode=require",
        ] {
            assert!(ConnConfig::parse(s, &env()).is_err(), "{s}");
        }
    }

    #[test]
    fn tls_settings_and_their_defaults() {
        let home = Env {
            home: Some("/home/me".into()),
            ..env()
        };
        let c = ConnConfig::parse("host=db", &home).unwrap();
        assert_eq!(
            c.tls,
            TlsConfig {
                mode: SslMode::Prefer,
                root_cert: Some(RootCert::File("/home/me/.postgresql/root.crt".into())),
                cert: Some("/home/me/.postgresql/postgresql.crt".into()),
                key: Some("/home/me/.postgresql/postgresql.key".into()),
                channel_binding: ChannelBindingMode::Prefer,
            }
        );
        let c = ConnConfig::parse(
            "postgresql://db/x?sslmode=verify-ca&sslrootcert=/ca.pem&sslcert=/c&sslkey=/k&channel_binding=require",
            &home,
        )
        .unwrap();
        assert_eq!(
            c.tls,
            TlsConfig {
                mode: SslMode::VerifyCa,
                root_cert: Some(RootCert::File("/ca.pem".into())),
                cert: Some("/c".into()),
                key: Some("/k".into()),
                channel_binding: ChannelBindingMode::Require,
            }
        );
        // The environment fills in; the string wins.
        let e = Env {
            sslmode: Some("require".into()),
            channel_binding: Some("disable".into()),
            sslrootcert: Some("system".into()),
            ..env()
        };
        assert!(ConnConfig::parse("host=db", &e).is_err());
        let c = ConnConfig::parse("host=db sslmode=verify-full", &e).unwrap();
        assert_eq!(c.tls.root_cert, Some(RootCert::System));
        assert_eq!(c.tls.channel_binding, ChannelBindingMode::Disable);
        let c = ConnConfig::parse("host=db sslrootcert=system", &env()).unwrap();
        assert_eq!(c.tls.mode, SslMode::VerifyFull);
        assert_eq!(
            ConnConfig::parse("", &env()).unwrap().tls,
            TlsConfig::default()
        );
    }

    #[test]
    fn connect_timeout_as_libpq() {
        let t = |s: &str, e: &Env| ConnConfig::parse(s, e).map(|c| c.connect_timeout);
        assert_eq!(t("", &env()).unwrap(), None);
        assert_eq!(t("connect_timeout=0", &env()).unwrap(), None);
        assert_eq!(t("connect_timeout=-3", &env()).unwrap(), None);
        assert_eq!(
            t("connect_timeout=1", &env()).unwrap(),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            t("connect_timeout=10", &env()).unwrap(),
            Some(Duration::from_secs(10))
        );
        assert!(t("connect_timeout=2.5", &env()).is_err());
        assert!(t("connect_timeout=soon", &env()).is_err());
        let e = Env {
            connect_timeout: Some("7".into()),
            ..env()
        };
        assert_eq!(t("", &e).unwrap(), Some(Duration::from_secs(7)));
        assert_eq!(
            t("postgresql://h/d?connect_timeout=3", &e).unwrap(),
            Some(Duration::from_secs(3))
        );
    }

    #[test]
    fn hostaddr_is_where_to_connect_and_host_the_name() {
        let c = ConnConfig::parse("host=db.example hostaddr=192.0.2.7", &env()).unwrap();
        assert_eq!(c.host, Host::Tcp("db.example".into()));
        assert_eq!(c.hostaddr, Some("192.0.2.7".parse().unwrap()));
        assert_eq!(c.tls_name(), Some("db.example"));
        // Whichever comes first.
        let d = ConnConfig::parse("hostaddr=192.0.2.7 host=db.example", &env()).unwrap();
        assert_eq!(d, c);
        // An address alone: no name to verify a certificate against.
        let c = ConnConfig::parse("hostaddr=::1", &env()).unwrap();
        assert_eq!(
            (c.host.clone(), c.tls_name()),
            (Host::Tcp(String::new()), None)
        );
        assert_eq!(c.socket_path(), None);
        // A socket directory with an address: TCP to the address.
        let c = ConnConfig::parse("host=/tmp hostaddr=127.0.0.1", &env()).unwrap();
        assert_eq!((c.socket_path(), c.tls_name()), (None, None));
        // PGHOSTADDR pairs with PGHOST.
        let e = Env {
            host: Some("db.example".into()),
            hostaddr: Some("10.0.0.1".into()),
            ..env()
        };
        let c = ConnConfig::parse("", &e).unwrap();
        assert_eq!(c.tls_name(), Some("db.example"));
        assert_eq!(c.hostaddr, Some("10.0.0.1".parse().unwrap()));
        // The password file is searched for the name, else the address.
        let c = ConnConfig::parse("host=db.example hostaddr=10.0.0.1 user=u", &env()).unwrap();
        assert_eq!(
            c.passfile_lookup("db.example:*:*:u:byname\n").as_deref(),
            Some("byname")
        );
        assert_eq!(c.passfile_lookup("10.0.0.1:*:*:u:byaddr\n"), None);
        let c = ConnConfig::parse("hostaddr=10.0.0.1 user=u", &env()).unwrap();
        assert_eq!(
            c.passfile_lookup("10.0.0.1:*:*:u:byaddr\n").as_deref(),
            Some("byaddr")
        );
        for bad in [
            "hostaddr=db.example",
            "hostaddr=10.0.0.1,10.0.0.2",
            "host=a,b",
        ] {
            assert!(ConnConfig::parse(bad, &env()).is_err(), "{bad}");
        }
    }

    #[test]
    fn passfile_matching() {
        let c = ConnConfig::parse("host=/s port=5 user=u dbname=d", &env()).unwrap();
        let text = "# comment\nother:*:*:*:no\nlocalhost:5:*:u:pa\\:ss\n*:*:*:*:late\n";
        assert_eq!(c.passfile_lookup(text).as_deref(), Some("pa:ss"));
        assert_eq!(c.passfile_lookup("h:5:d:u:x\n"), None);
    }
}
