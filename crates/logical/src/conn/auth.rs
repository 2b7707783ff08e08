//! StartupMessage and authentication (protocol.sgml "Start-up" and "SASL Authentication"):
//! trust, cleartext password, md5, SCRAM-SHA-256, and SCRAM-SHA-256-PLUS with
//! `tls-server-end-point` channel binding over TLS. `channel_binding` follows libpq
//! (`fe-auth.c`): prefer binds when it can, require refuses every login that is not bound.
//! Message building and the SCRAM exchange come from `postgres-protocol`.

use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{
    ChannelBinding, ScramSha256, SCRAM_SHA_256, SCRAM_SHA_256_PLUS,
};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::{server_error, tls, ChannelBindingMode, ConnConfig, ConnError, Connection};

const REQUIRE: &str = "channel_binding=require";

/// Refuses a login that cannot be bound when `channel_binding=require`.
fn refuse_unbound(config: &ConnConfig, how: &str) -> Result<(), ConnError> {
    if config.tls.channel_binding == ChannelBindingMode::Require {
        return Err(ConnError::Auth(format!(
            "{REQUIRE}, but {how}: channel binding needs TLS (a TCP host and sslmode=require \
             or stronger) and a scram-sha-256 login; or drop {REQUIRE}"
        )));
    }
    Ok(())
}

/// The mechanism and channel binding for the mechanisms the server offers (libpq's
/// `pg_SASL_init`).
fn choose_mechanism(
    conn: &Connection,
    config: &ConnConfig,
    offered: &[String],
) -> Result<(&'static str, ChannelBinding), ConnError> {
    let plus = offered.iter().any(|m| m == SCRAM_SHA_256_PLUS);
    let mode = config.tls.channel_binding;
    match &conn.server_cert {
        Some(cert) if plus && mode != ChannelBindingMode::Disable => Ok((
            SCRAM_SHA_256_PLUS,
            ChannelBinding::tls_server_end_point(tls::tls_server_end_point(cert)?),
        )),
        None if plus => Err(ConnError::Auth(
            "the server offers SCRAM-SHA-256-PLUS on a connection without TLS (did something \
             between here and the server strip TLS?); refusing"
                .into(),
        )),
        tls_on => {
            if !offered.iter().any(|m| m == SCRAM_SHA_256) {
                return Err(ConnError::Auth(format!(
                    "the server offers SASL mechanisms {offered:?}; this client speaks \
                     {SCRAM_SHA_256} and {SCRAM_SHA_256_PLUS}"
                )));
            }
            refuse_unbound(
                config,
                if tls_on.is_some() {
                    "the server does not offer SCRAM-SHA-256-PLUS"
                } else {
                    "the connection does not use TLS"
                },
            )?;
            // "y": this client could bind but the server did not offer it, so a server that
            // does support binding can tell a downgrade (RFC 5802 section 6).
            let binding = if tls_on.is_some() && mode != ChannelBindingMode::Disable {
                ChannelBinding::unrequested()
            } else {
                ChannelBinding::unsupported()
            };
            Ok((SCRAM_SHA_256, binding))
        }
    }
}

fn password<'a>(config: &'a ConnConfig, method: &str) -> Result<&'a [u8], ConnError> {
    config
        .password
        .as_deref()
        .map(str::as_bytes)
        .ok_or_else(|| {
            ConnError::Auth(format!(
                "the server asks for a {method} password for user \"{}\" but none was given \
             (password= in the connection string, PGPASSWORD, or the password file)",
                config.user
            ))
        })
}

/// Sends the StartupMessage with `replication=database`, authenticates, and reads the
/// parameters up to ReadyForQuery.
pub(super) fn startup(conn: &mut Connection, config: &ConnConfig) -> Result<(), ConnError> {
    let params = [
        ("user", config.user.as_str()),
        ("database", config.dbname.as_str()),
        ("replication", "database"),
        ("application_name", config.application_name.as_str()),
    ];
    frontend::startup_message(params, &mut conn.wbuf)
        .map_err(ConnError::io("building the startup message"))?;
    conn.flush()?;
    let mut scram: Option<ScramSha256> = None;
    let mut plus = false;
    let mut scram_done = false;
    let what = match &conn.peer {
        Some(p) => format!("{p}: waiting for the server to log this client in"),
        None => "waiting for the server to log this client in".to_owned(),
    };
    loop {
        let f = conn.read_frame_blocking(&what)?;
        match f.parse()? {
            Message::AuthenticationOk => {
                if scram.is_some() && !scram_done {
                    // Without SASLFinal the server never proved it knows the password (nor,
                    // with PLUS, that it sits at the other end of this TLS session).
                    return Err(ConnError::Auth(
                        "the server ended SCRAM without its final message; refusing".into(),
                    ));
                }
                if !conn.channel_bound {
                    refuse_unbound(
                        config,
                        "the server let this client in without channel binding",
                    )?;
                }
                conn.authenticated = true;
            }
            Message::AuthenticationCleartextPassword => {
                refuse_unbound(config, "the server asks for a cleartext password")?;
                let pw = password(config, "cleartext")?;
                frontend::password_message(pw, &mut conn.wbuf)
                    .map_err(ConnError::io("building the password message"))?;
                conn.flush()?;
            }
            Message::AuthenticationMd5Password(body) => {
                refuse_unbound(config, "the server asks for an md5 password")?;
                let pw = password(config, "md5")?;
                let hash = md5_hash(config.user.as_bytes(), pw, body.salt());
                frontend::password_message(hash.as_bytes(), &mut conn.wbuf)
                    .map_err(ConnError::io("building the password message"))?;
                conn.flush()?;
            }
            Message::AuthenticationSasl(body) => {
                let mut offered = Vec::new();
                let mut it = body.mechanisms();
                while let Some(m) = it
                    .next()
                    .map_err(|e| ConnError::Protocol(format!("SASL mechanisms: {e}")))?
                {
                    offered.push(m.to_owned());
                }
                let (mechanism, binding) = choose_mechanism(conn, config, &offered)?;
                let pw = password(config, mechanism)?;
                let s = ScramSha256::new(pw, binding);
                frontend::sasl_initial_response(mechanism, s.message(), &mut conn.wbuf)
                    .map_err(ConnError::io("building the SASL response"))?;
                conn.flush()?;
                scram = Some(s);
                plus = mechanism == SCRAM_SHA_256_PLUS;
            }
            Message::AuthenticationSaslContinue(body) => {
                let s = scram
                    .as_mut()
                    .ok_or_else(|| ConnError::Protocol("SASLContinue before SASL".into()))?;
                s.update(body.data())
                    .map_err(|e| ConnError::Auth(format!("SCRAM: {e}")))?;
                frontend::sasl_response(s.message(), &mut conn.wbuf)
                    .map_err(ConnError::io("building the SASL response"))?;
                conn.flush()?;
            }
            Message::AuthenticationSaslFinal(body) => {
                let s = scram
                    .as_mut()
                    .ok_or_else(|| ConnError::Protocol("SASLFinal before SASL".into()))?;
                s.finish(body.data()).map_err(|e| {
                    ConnError::Auth(format!("SCRAM: the server's signature is wrong: {e}"))
                })?;
                // The server's signature covers the channel binding it checked.
                conn.channel_bound = plus;
                scram_done = true;
            }
            Message::ParameterStatus(p) => {
                if let (Ok(n), Ok(v)) = (p.name(), p.value()) {
                    conn.params.insert(n.to_owned(), v.to_owned());
                }
            }
            Message::ErrorResponse(body) => return Err(server_error(&body)),
            Message::ReadyForQuery(_) => return Ok(()),
            Message::BackendKeyData(k) => {
                conn.backend_key = Some((k.process_id(), k.secret_key()));
            }
            Message::NoticeResponse(_) => {}
            _ => {
                return Err(ConnError::Auth(format!(
                    "unsupported authentication request or message '{}' during start-up",
                    f.tag as char
                )))
            }
        }
    }
}
