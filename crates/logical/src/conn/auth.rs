//! StartupMessage and authentication (protocol.sgml "Start-up" and "SASL Authentication"):
//! trust, cleartext password, md5 and SCRAM-SHA-256 without channel binding (this client has
//! no TLS). Message building and the SCRAM exchange come from `postgres-protocol`.

use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::md5_hash;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

use super::{server_error, ConnConfig, ConnError, Connection};

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
    loop {
        let f = conn.read_frame_blocking()?;
        match f.parse()? {
            Message::AuthenticationOk => {}
            Message::AuthenticationCleartextPassword => {
                let pw = password(config, "cleartext")?;
                frontend::password_message(pw, &mut conn.wbuf)
                    .map_err(ConnError::io("building the password message"))?;
                conn.flush()?;
            }
            Message::AuthenticationMd5Password(body) => {
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
                if !offered.iter().any(|m| m == SCRAM_SHA_256) {
                    return Err(ConnError::Auth(format!(
                        "the server offers SASL mechanisms {offered:?}; this client speaks {SCRAM_SHA_256} only"
                    )));
                }
                let pw = password(config, SCRAM_SHA_256)?;
                let s = ScramSha256::new(pw, ChannelBinding::unsupported());
                frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut conn.wbuf)
                    .map_err(ConnError::io("building the SASL response"))?;
                conn.flush()?;
                scram = Some(s);
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
            }
            Message::ParameterStatus(p) => {
                if let (Ok(n), Ok(v)) = (p.name(), p.value()) {
                    conn.params.insert(n.to_owned(), v.to_owned());
                }
            }
            Message::ErrorResponse(body) => return Err(server_error(&body)),
            Message::ReadyForQuery(_) => return Ok(()),
            Message::BackendKeyData(_) | Message::NoticeResponse(_) => {}
            _ => {
                return Err(ConnError::Auth(format!(
                    "unsupported authentication request or message '{}' during start-up",
                    f.tag as char
                )))
            }
        }
    }
}
