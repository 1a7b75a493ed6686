//! The [`Sealer`] of `baton dev`: AES-256-GCM under a key kept in the data
//! directory (`connections.key`, 32 random bytes, readable by its owner
//! only), made on first use. The context is the additional authenticated
//! data, so an item moved under another person or provider does not open.
//!
//! Sealed form: `1` (the format), a 12-byte random nonce, the ciphertext
//! and its 16-byte tag.

use async_trait::async_trait;
use baton_core::connection::{SealError, Sealer};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The key file's name in the data directory.
pub const KEY_FILE: &str = "connections.key";
const KEY_LEN: usize = 32;
const FORMAT: u8 = 1;

/// Why the key file cannot be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("cannot read or create {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a connections key ({len} bytes, expected {KEY_LEN}); restore it or delete it (every connection is then lost)")]
    Malformed { path: PathBuf, len: usize },
    #[error("no random bytes from the operating system")]
    Random,
}

/// AES-256-GCM under the key file of a data directory.
pub struct KeyFileSealer {
    key: LessSafeKey,
    rng: SystemRandom,
}

impl KeyFileSealer {
    /// Reads `{data_dir}/connections.key`, making it (mode 0600) first if
    /// there is none. Two processes starting at once end with one key:
    /// the file appears whole or not at all (written aside, then linked).
    pub fn open_or_create(data_dir: &Path) -> Result<KeyFileSealer, KeyFileError> {
        let path = data_dir.join(KEY_FILE);
        let io = |source| KeyFileError::Io {
            path: path.clone(),
            source,
        };
        let rng = SystemRandom::new();
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(data_dir).map_err(io)?;
                let mut fresh = [0u8; KEY_LEN];
                rng.fill(&mut fresh).map_err(|_| KeyFileError::Random)?;
                let aside = data_dir.join(format!("{KEY_FILE}.{}", std::process::id()));
                write_private(&aside, &fresh).map_err(io)?;
                let linked = std::fs::hard_link(&aside, &path);
                let _ = std::fs::remove_file(&aside);
                match linked {
                    Ok(()) => {}
                    // Another process made it first: use theirs.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io(e)),
                }
                std::fs::read(&path).map_err(io)?
            }
            Err(e) => return Err(io(e)),
        };
        let unbound = UnboundKey::new(&AES_256_GCM, &bytes)
            .ok()
            .filter(|_| bytes.len() == KEY_LEN)
            .ok_or(KeyFileError::Malformed {
                path: path.clone(),
                len: bytes.len(),
            })?;
        Ok(KeyFileSealer {
            key: LessSafeKey::new(unbound),
            rng,
        })
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn failed(action: &'static str, reason: &str) -> SealError {
    SealError {
        action,
        reason: reason.to_owned(),
    }
}

/// AES-256-GCM of `plaintext` under `key` with `aad`: format byte, nonce,
/// ciphertext and tag.
fn seal_with(
    key: &LessSafeKey,
    rng: &SystemRandom,
    plaintext: &[u8],
    aad: &[u8],
) -> Result<Vec<u8>, SealError> {
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill(&mut nonce)
        .map_err(|_| failed("seal", "no random bytes from the operating system"))?;
    let mut buf = plaintext.to_vec();
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut buf,
    )
    .map_err(|_| failed("seal", "encryption failed"))?;
    let mut out = Vec::with_capacity(1 + NONCE_LEN + buf.len());
    out.push(FORMAT);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&buf);
    Ok(out)
}

fn open_with(key: &LessSafeKey, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SealError> {
    let refused = || {
        failed(
            "open",
            "the key, the item or its context does not match (tampered, moved, or another key)",
        )
    };
    let (format, rest) = sealed.split_first().ok_or_else(refused)?;
    if *format != FORMAT || rest.len() < NONCE_LEN {
        return Err(refused());
    }
    let (nonce, body) = rest.split_at(NONCE_LEN);
    let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| refused())?;
    let mut buf = body.to_vec();
    let plain = key
        .open_in_place(nonce, Aad::from(aad), &mut buf)
        .map_err(|_| refused())?;
    Ok(plain.to_vec())
}

#[async_trait]
impl Sealer for KeyFileSealer {
    async fn seal(&self, plaintext: &[u8], context: &str) -> Result<Vec<u8>, SealError> {
        seal_with(&self.key, &self.rng, plaintext, context.as_bytes())
    }

    async fn open(&self, sealed: &[u8], context: &str) -> Result<Vec<u8>, SealError> {
        open_with(&self.key, sealed, context.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_key_is_made_once_private_and_opens_only_its_own_items() {
        let dir = tempfile::tempdir().unwrap();
        let sealer = KeyFileSealer::open_or_create(dir.path()).unwrap();
        let path = dir.path().join(KEY_FILE);
        assert_eq!(std::fs::read(&path).unwrap().len(), KEY_LEN);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let sealed = sealer.seal(b"at-SECRET-token", "ctx/a").await.unwrap();
        assert!(!sealed.windows(6).any(|w| w == b"SECRET"));
        assert_eq!(
            sealer.open(&sealed, "ctx/a").await.unwrap(),
            b"at-SECRET-token"
        );
        // Reopened: the same key.
        let again = KeyFileSealer::open_or_create(dir.path()).unwrap();
        assert_eq!(
            again.open(&sealed, "ctx/a").await.unwrap(),
            b"at-SECRET-token"
        );
        // A wrong context, a changed byte, a truncated item, another key.
        assert!(sealer.open(&sealed, "ctx/b").await.is_err());
        let mut tampered = sealed.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        assert!(sealer.open(&tampered, "ctx/a").await.is_err());
        tampered = sealed.clone();
        tampered[20] ^= 1;
        assert!(sealer.open(&tampered, "ctx/a").await.is_err());
        assert!(sealer.open(&sealed[..10], "ctx/a").await.is_err());
        assert!(sealer.open(&[], "ctx/a").await.is_err());
        let other = tempfile::tempdir().unwrap();
        let stranger = KeyFileSealer::open_or_create(other.path()).unwrap();
        assert!(stranger.open(&sealed, "ctx/a").await.is_err());
        // Two seals of one plaintext differ (fresh nonces).
        assert_ne!(
            sealer.seal(b"x", "c").await.unwrap(),
            sealer.seal(b"x", "c").await.unwrap()
        );
    }

    #[test]
    fn a_key_file_of_the_wrong_size_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), b"short").unwrap();
        let err = KeyFileSealer::open_or_create(dir.path()).err().unwrap();
        assert!(
            matches!(err, KeyFileError::Malformed { len: 5, .. }),
            "{err}"
        );
    }
}
