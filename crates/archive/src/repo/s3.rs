//! The S3-compatible object store: containers are objects `<prefix>/<name>.pgcz` in a bucket.
//!
//! Publishing uses a conditional write (`PutObject` with `If-None-Match: *`), which the
//! store rejects when the key exists, so a push never overwrites an object, even when two
//! pushes race. An object is visible only once the store has it whole and durably; there are
//! no temporary objects. Stores that ignore the condition (older S3-compatible servers) still
//! get the existence check every push makes before it writes, which catches every
//! overwrite except one racing a concurrent push of the same name.
//!
//! The client is [`object_store`]'s; its async runtime stays inside [`S3Store`]. Each call
//! crosses one explicit blocking boundary ([`S3Store::run`]): its future runs on the store's
//! private current-thread runtime, driven from a thread of its own, and the calling thread
//! waits for the result. The caller's thread never enters that runtime, so the repository
//! can be called from anywhere, including from inside another tokio runtime (where a plain
//! `block_on` panics); async callers should still call it through `spawn_blocking`, since
//! the call blocks until the store answers.

use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::{Path as ObjectPath, PathPart};
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig};

use super::{S3Options, Store};
use crate::error::ArchiveError;

/// A bucket and a key prefix of an S3-compatible object store.
#[derive(Debug)]
pub struct S3Store {
    client: AmazonS3,
    runtime: tokio::runtime::Runtime,
    bucket: String,
    prefix: ObjectPath,
}

impl S3Store {
    /// A store for `s3://bucket/prefix`. Nothing is contacted until the first operation.
    pub fn new(bucket: &str, prefix: &str, opts: &S3Options) -> Result<S3Store, ArchiveError> {
        let config = |why: String| ArchiveError::Config(format!("s3://{bucket}: {why}"));
        check_bucket(bucket).map_err(config)?;
        let prefix = normalize_prefix(prefix).map_err(config)?;
        // The environment supplies credentials (and, when `opts` leaves them open, the
        // endpoint and region); `opts` overrides it.
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(RetryConfig {
                max_retries: 5,
                retry_timeout: Duration::from_secs(60),
                ..RetryConfig::default()
            });
        if let Some(region) = &opts.region {
            builder = builder.with_region(region);
        }
        if let Some(endpoint) = &opts.endpoint {
            check_endpoint(endpoint).map_err(config)?;
            builder = builder
                .with_endpoint(endpoint)
                // AWS_ENDPOINT_URL_S3 in the environment would otherwise win over it.
                .with_config(AmazonS3ConfigKey::S3Endpoint, endpoint)
                .with_allow_http(endpoint.starts_with("http://"));
        }
        let client = builder.build().map_err(|e| config(one_line(&e)))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| config(format!("starting the I/O runtime: {e}")))?;
        Ok(S3Store {
            client,
            runtime,
            bucket: bucket.to_owned(),
            prefix: ObjectPath::from(prefix),
        })
    }

    /// Runs `io` to completion on the store's runtime, driven from a scoped thread of its
    /// own, and returns its output: the one place the store blocks. The calling thread
    /// never enters a runtime, so this works (and does not panic) inside a tokio runtime,
    /// on one of its workers or its blocking pool. A thread per call costs tens of
    /// microseconds, against the milliseconds of a request to the store.
    fn run<F>(&self, io: F) -> F::Output
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        std::thread::scope(
            |scope| match scope.spawn(|| self.runtime.block_on(io)).join() {
                Ok(out) => out,
                Err(panic) => std::panic::resume_unwind(panic),
            },
        )
    }

    fn path(&self, key: &str) -> Result<ObjectPath, ArchiveError> {
        let part = PathPart::parse(key).map_err(|e| ArchiveError::Store {
            what: format!("naming {key:?} in"),
            location: self.location(),
            detail: one_line(&e),
        })?;
        Ok(self.prefix.clone().join(part))
    }

    fn error(&self, what: String, e: &object_store::Error) -> ArchiveError {
        ArchiveError::Store {
            what,
            location: self.location(),
            detail: one_line(e),
        }
    }
}

impl Store for S3Store {
    fn read(&self, key: &str) -> Result<Option<Vec<u8>>, ArchiveError> {
        let path = self.path(key)?;
        let got = self.run(async {
            match self.client.get(&path).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map(|b| b.map(Vec::from))
            .map_err(|e| self.error(format!("reading {key} from"), &e))
    }

    fn read_head(&self, key: &str, len: usize) -> Result<Option<(u64, Vec<u8>)>, ArchiveError> {
        let path = self.path(key)?;
        let got = self.run(async {
            let meta = match self.client.head(&path).await {
                Ok(m) => m,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            let end = meta.size.min(len as u64);
            if end == 0 {
                return Ok(Some((meta.size, Vec::new())));
            }
            match self.client.get_range(&path, 0..end).await {
                Ok(b) => Ok(Some((meta.size, Vec::from(b)))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        got.map_err(|e| self.error(format!("reading {key} from"), &e))
    }

    fn create(&self, key: &str, bytes: Vec<u8>) -> Result<bool, ArchiveError> {
        let path = self.path(key)?;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let put = self.run(self.client.put_opts(&path, PutPayload::from(bytes), opts));
        match put {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(self.error(format!("storing {key} in"), &e)),
        }
    }

    fn settle(&self, _key: &str) -> Result<(), ArchiveError> {
        // A successful PutObject is durable; there is nothing to flush.
        Ok(())
    }

    fn list_modified(
        &self,
    ) -> Result<Vec<(String, u64, Option<std::time::SystemTime>)>, ArchiveError> {
        let prefix = (!self.prefix.as_ref().is_empty()).then_some(&self.prefix);
        let listed = self
            .run(self.client.list_with_delimiter(prefix))
            .map_err(|e| self.error("listing".into(), &e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                let key = o.location.filename()?.to_owned();
                Some((key, o.size, Some(o.last_modified.into())))
            })
            .collect())
    }

    fn delete(&self, keys: &[String]) -> Result<(), ArchiveError> {
        let paths = keys
            .iter()
            .map(|k| Ok((k, self.path(k)?)))
            .collect::<Result<Vec<_>, ArchiveError>>()?;
        // One request per object, in order, over the client's persistent connection; a
        // successful DeleteObject is durable, and deleting an absent key succeeds.
        let deleted = self.run(async {
            for (key, path) in &paths {
                match self.client.delete(path).await {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err((*key, e)),
                }
            }
            Ok(())
        });
        deleted.map_err(|(key, e)| self.error(format!("removing {key} from"), &e))
    }

    fn check_present(&self) -> Result<(), ArchiveError> {
        let prefix = (!self.prefix.as_ref().is_empty()).then(|| self.prefix.as_ref());
        let opts = PaginatedListOptions {
            max_keys: Some(1),
            ..PaginatedListOptions::default()
        };
        match self.run(self.client.list_paginated(prefix, opts)) {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Err(ArchiveError::NoRepository {
                location: self.location(),
                reason: format!("cannot be used: bucket {} does not exist", self.bucket),
            }),
            Err(e) => Err(self.error("listing".into(), &e)),
        }
    }

    fn create_location(&self) -> Result<(), ArchiveError> {
        // A prefix needs no creating; the bucket is the operator's to create.
        self.check_present()
    }

    fn location(&self) -> String {
        if self.prefix.as_ref().is_empty() {
            format!("s3://{}", self.bucket)
        } else {
            format!("s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// Checks a bucket name: what S3 and its compatible servers accept, loosely.
pub(crate) fn check_bucket(bucket: &str) -> Result<(), String> {
    if bucket.is_empty() {
        return Err("no bucket name (write s3://bucket/prefix)".into());
    }
    if bucket.len() > 255
        || !bucket
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
    {
        return Err(format!(
            "bucket name {bucket:?} is not valid (letters, digits, '.', '-' and '_' only)"
        ));
    }
    Ok(())
}

/// The prefix without leading or trailing slashes, checked segment by segment.
pub(crate) fn normalize_prefix(prefix: &str) -> Result<String, String> {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    for segment in trimmed.split('/') {
        if segment.is_empty() {
            return Err(format!("prefix {prefix:?} has an empty segment (\"//\")"));
        }
        PathPart::parse(segment).map_err(|_| {
            format!("prefix {prefix:?}: segment {segment:?} is not allowed (\".\", \"..\" or control characters)")
        })?;
    }
    Ok(trimmed.to_owned())
}

fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let rest = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"));
    match rest {
        Some(host) if !host.is_empty() && !host.starts_with('/') => Ok(()),
        _ => Err(format!(
            "endpoint {endpoint:?} is not an http:// or https:// URL"
        )),
    }
}

/// An error and its causes on one line, each cause once.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_and_buckets() {
        assert_eq!(normalize_prefix("/a/b/").as_deref(), Ok("a/b"));
        assert_eq!(normalize_prefix("").as_deref(), Ok(""));
        assert!(normalize_prefix("a//b").is_err());
        assert!(normalize_prefix("a/../b").is_err());
        assert!(check_bucket("").is_err());
        assert!(check_bucket("my bucket").is_err());
        assert!(check_bucket("wal-archive.prod").is_ok());
        assert!(check_endpoint("http://127.0.0.1:9000").is_ok());
        assert!(check_endpoint("127.0.0.1:9000").is_err());
        assert!(check_endpoint("https://").is_err());
    }

    #[test]
    fn a_bad_endpoint_is_a_configuration_error() {
        let opts = S3Options {
            endpoint: Some("ftp://example.invalid".into()),
            region: None,
        };
        let e = S3Store::new("b", "p", &opts).expect_err("refused");
        assert!(matches!(e, ArchiveError::Config(_)), "{e}");
        assert!(e.to_string().contains("ftp://"), "{e}");
    }
}
