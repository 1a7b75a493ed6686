//! The [`Sealer`] of a deployment on AWS: envelope encryption under a KMS
//! key (`BATON_CONNECTIONS_KEY`: a key id, ARN or alias). Each seal asks
//! KMS for a fresh AES-256 data key (`GenerateDataKey`), encrypts locally
//! with AES-256-GCM, and keeps only the data key as KMS encrypted it;
//! opening asks KMS to decrypt that (`Decrypt`). The context is both the
//! AES-GCM additional data and the KMS encryption context
//! (`{"baton:connection": context}`, also in CloudTrail), so an item moved
//! under another person or provider does not open.
//!
//! Sealed form: `1` (the format), the encrypted data key's length (2 bytes,
//! big-endian) and bytes, a 12-byte random nonce, the ciphertext and tag.

use crate::lazy::LazyClient;
use async_trait::async_trait;
use aws_sdk_kms::error::{DisplayErrorContext, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use baton_core::connection::{SealError, Sealer};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};

/// The KMS encryption context key the context is bound under.
pub const CONTEXT_KEY: &str = "baton:connection";
const FORMAT: u8 = 1;

/// Envelope encryption under one KMS key.
pub struct KmsSealer {
    client: LazyClient<aws_sdk_kms::Client>,
    key_id: String,
    rng: SystemRandom,
}

impl KmsSealer {
    /// Seals under `key_id` (key id, ARN, or `alias/…`).
    pub fn new(client: aws_sdk_kms::Client, key_id: impl Into<String>) -> Self {
        KmsSealer {
            client: LazyClient::ready(client),
            key_id: key_id.into(),
            rng: SystemRandom::new(),
        }
    }

    /// Seals under `key_id` with a KMS client for `cfg` built at the first
    /// seal or open (most requests to a function never need one).
    pub fn from_config(cfg: &aws_config::SdkConfig, key_id: impl Into<String>) -> Self {
        let cfg = cfg.clone();
        KmsSealer {
            client: LazyClient::new(move || crate::kms_client(&cfg)),
            key_id: key_id.into(),
            rng: SystemRandom::new(),
        }
    }
}

fn failed(action: &'static str, reason: impl Into<String>) -> SealError {
    SealError {
        action,
        reason: reason.into(),
    }
}

fn kms_failed<E, R>(action: &'static str, op: &str, e: SdkError<E, R>) -> SealError
where
    E: std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug,
{
    failed(action, format!("KMS {op}: {}", DisplayErrorContext(&e)))
}

fn data_key(bytes: &[u8], action: &'static str) -> Result<LessSafeKey, SealError> {
    UnboundKey::new(&AES_256_GCM, bytes)
        .map(LessSafeKey::new)
        .map_err(|_| failed(action, "KMS returned a data key that is not AES-256"))
}

#[async_trait]
impl Sealer for KmsSealer {
    async fn seal(&self, plaintext: &[u8], context: &str) -> Result<Vec<u8>, SealError> {
        let out = self
            .client
            .get()
            .generate_data_key()
            .key_id(&self.key_id)
            .key_spec(DataKeySpec::Aes256)
            .encryption_context(CONTEXT_KEY, context)
            .send()
            .await
            .map_err(|e| kms_failed("seal", "GenerateDataKey", e))?;
        let (Some(plain_key), Some(wrapped)) = (out.plaintext(), out.ciphertext_blob()) else {
            return Err(failed("seal", "KMS GenerateDataKey returned no key"));
        };
        let key = data_key(plain_key.as_ref(), "seal")?;
        let wrapped = wrapped.as_ref();
        let wrapped_len = u16::try_from(wrapped.len())
            .map_err(|_| failed("seal", "KMS returned an oversized encrypted data key"))?;
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| failed("seal", "no random bytes from the operating system"))?;
        let mut buf = plaintext.to_vec();
        key.seal_in_place_append_tag(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(context.as_bytes()),
            &mut buf,
        )
        .map_err(|_| failed("seal", "encryption failed"))?;
        let mut sealed = Vec::with_capacity(3 + wrapped.len() + NONCE_LEN + buf.len());
        sealed.push(FORMAT);
        sealed.extend_from_slice(&wrapped_len.to_be_bytes());
        sealed.extend_from_slice(wrapped);
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&buf);
        Ok(sealed)
    }

    async fn open(&self, sealed: &[u8], context: &str) -> Result<Vec<u8>, SealError> {
        let refused = || failed("open", "the item or its context does not match");
        let (&format, rest) = sealed.split_first().ok_or_else(refused)?;
        if format != FORMAT || rest.len() < 2 {
            return Err(refused());
        }
        let (len, rest) = rest.split_at(2);
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        if rest.len() < len + NONCE_LEN {
            return Err(refused());
        }
        let (wrapped, rest) = rest.split_at(len);
        let (nonce, body) = rest.split_at(NONCE_LEN);
        let out = self
            .client
            .get()
            .decrypt()
            .key_id(&self.key_id)
            .ciphertext_blob(Blob::new(wrapped))
            .encryption_context(CONTEXT_KEY, context)
            .send()
            .await
            .map_err(|e| kms_failed("open", "Decrypt", e))?;
        let plain_key = out
            .plaintext()
            .ok_or_else(|| failed("open", "KMS Decrypt returned no key"))?;
        let key = data_key(plain_key.as_ref(), "open")?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
        let mut buf = body.to_vec();
        let plain = key
            .open_in_place(nonce, Aad::from(context.as_bytes()), &mut buf)
            .map_err(|_| refused())?;
        Ok(plain.to_vec())
    }
}

#[cfg(test)]
mod tests;
