//! The blob port: traces and payloads too large for a table item.

use async_trait::async_trait;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum BlobError {
    #[error("blob store unavailable: {0}")]
    Unavailable(String),
    #[error("invalid blob key: {0}")]
    InvalidKey(String),
}

#[async_trait]
pub trait BlobStore: Send + Sync {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BlobError>;
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError>;
    /// Keys starting with `prefix`, sorted ascending.
    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError>;
}
