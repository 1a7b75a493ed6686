//! [`BlobStore`] on an S3 bucket, optionally under a key prefix.

use async_trait::async_trait;
use aws_sdk_s3::error::{DisplayErrorContext, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;
use baton_core::{BlobError, BlobStore};

use crate::lazy::LazyClient;

/// S3's limit on key length, in UTF-8 bytes.
const MAX_KEY_BYTES: usize = 1024;

/// A [`BlobStore`] backed by an S3 bucket. Cheap to clone.
#[derive(Clone, Debug)]
pub struct S3Blobs {
    client: LazyClient<Client>,
    bucket: String,
    /// Prepended to every key; empty or ending in `/`.
    prefix: String,
    /// Keys per ListObjectsV2 page; `None` is S3's default (1000).
    list_page_size: Option<i32>,
}

impl S3Blobs {
    /// Adapter for `bucket`. With a `prefix` (e.g. `"dev"`), blobs live under
    /// `dev/` and keys passed to and returned by the port exclude it.
    pub fn new(client: Client, bucket: impl Into<String>, prefix: Option<&str>) -> Self {
        S3Blobs::new_with(LazyClient::ready(client), bucket, prefix)
    }

    /// As [`S3Blobs::new`], with the client ([`crate::s3_client`] of `cfg`)
    /// built at the first request rather than now: a process that never
    /// touches a blob (most of the ingest's requests) never builds it.
    pub fn from_config(
        cfg: &aws_config::SdkConfig,
        bucket: impl Into<String>,
        prefix: Option<&str>,
    ) -> Self {
        let cfg = cfg.clone();
        S3Blobs::new_with(
            LazyClient::new(move || crate::s3_client(&cfg)),
            bucket,
            prefix,
        )
    }

    fn new_with(
        client: LazyClient<Client>,
        bucket: impl Into<String>,
        prefix: Option<&str>,
    ) -> Self {
        let prefix = match prefix.map(|p| p.trim_matches('/')) {
            Some(p) if !p.is_empty() => format!("{p}/"),
            _ => String::new(),
        };
        S3Blobs {
            client,
            bucket: bucket.into(),
            prefix,
            list_page_size: None,
        }
    }

    /// Caps the keys fetched per ListObjectsV2 page (at least 1). Mostly
    /// for tests that want to exercise pagination with few objects.
    pub fn with_list_page_size(mut self, keys: usize) -> Self {
        self.list_page_size = Some(i32::try_from(keys.max(1)).unwrap_or(1000));
        self
    }

    /// The bucket name.
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    fn full_key(&self, key: &str) -> Result<String, BlobError> {
        if key.is_empty() {
            return Err(BlobError::InvalidKey("empty key".into()));
        }
        let full = format!("{}{key}", self.prefix);
        if full.len() > MAX_KEY_BYTES {
            return Err(BlobError::InvalidKey(format!(
                "key longer than {MAX_KEY_BYTES} bytes"
            )));
        }
        Ok(full)
    }
}

fn unavailable<E, R>(op: &str, e: SdkError<E, R>) -> BlobError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    BlobError::Unavailable(format!("S3 {op}: {}", DisplayErrorContext(&e)))
}

#[async_trait]
impl BlobStore for S3Blobs {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        let key = self.full_key(key)?;
        self.client
            .get()
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .map_err(|e| unavailable("PutObject", e))?;
        Ok(())
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        let key = self.full_key(key)?;
        let resp = match self
            .client
            .get()
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
        {
            Ok(resp) => resp,
            Err(e) if e.as_service_error().is_some_and(|se| se.is_no_such_key()) => {
                return Ok(None)
            }
            Err(e) => return Err(unavailable("GetObject", e)),
        };
        let body = resp
            .body
            .collect()
            .await
            .map_err(|e| BlobError::Unavailable(format!("S3 GetObject body: {e}")))?;
        Ok(Some(body.into_bytes().to_vec()))
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        let full_prefix = format!("{}{prefix}", self.prefix);
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let resp = self
                .client
                .get()
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(&full_prefix)
                .set_max_keys(self.list_page_size)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| unavailable("ListObjectsV2", e))?;
            for obj in resp.contents() {
                if let Some(k) = obj.key().and_then(|k| k.strip_prefix(&self.prefix)) {
                    keys.push(k.to_owned());
                }
            }
            match resp.next_continuation_token() {
                Some(t) if resp.is_truncated().unwrap_or(false) => token = Some(t.to_owned()),
                _ => break,
            }
        }
        // S3 lists in UTF-8 byte order already; sort so the port's promise
        // does not depend on that.
        keys.sort();
        Ok(keys)
    }
}

#[cfg(test)]
mod tests;
