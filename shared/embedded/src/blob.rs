//! [`BlobStore`] on plain files: the key is the path under the root.

use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use baton_core::{BlobError, BlobStore};

use crate::db::{Durability, OpenError};

/// Where writes are staged before being renamed into place. `~` is not a
/// key character, so no key can name it and `list` never shows it.
const STAGING_DIR: &str = "~tmp";

/// How old a staging file must be to count as a leftover. A put stages
/// for milliseconds; a younger file may be another store's write in flight
/// (`baton dev` and a command opened on the same data directory, or a
/// test's second handle), which must not be pulled from under it.
const STALE_STAGING: std::time::Duration = std::time::Duration::from_secs(3600);

/// Removes staging files a crash left: writes never renamed, i.e. never
/// acknowledged, so safe to drop. Best effort: one that cannot be read or
/// removed now is tried again at the next open.
fn drop_stale_staging(staging: &Path) {
    let Ok(entries) = fs::read_dir(staging) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|at| at.elapsed().is_ok_and(|age| age > STALE_STAGING));
        if stale {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Blobs as files under a root directory (`{data_dir}/blobs` in `baton
/// dev`).
///
/// Keys are relative paths of `/`-separated segments made of
/// `[A-Za-z0-9._-]`, none empty, `.` or `..`. A put writes a staging file,
/// fsyncs it and renames it over the target, so a reader (or a restart
/// after a crash) sees the old bytes or the new, never a torn file. With
/// [`Durability::Full`] the directory is fsynced too, so the rename itself
/// survives power loss.
#[derive(Clone, Debug)]
pub struct FileBlobStore {
    inner: Arc<Root>,
}

#[derive(Debug)]
struct Root {
    dir: PathBuf,
    durability: Durability,
}

fn unavailable(what: &str, e: io::Error) -> BlobError {
    BlobError::Unavailable(format!("{what}: {e}"))
}

fn valid_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Checks a key; `Err` names what is wrong with it.
pub fn validate_key(key: &str) -> Result<(), BlobError> {
    if key.is_empty() {
        return Err(BlobError::InvalidKey("empty key".into()));
    }
    if key.len() > 1024 {
        return Err(BlobError::InvalidKey("key longer than 1024 bytes".into()));
    }
    if !key.split('/').all(valid_segment) {
        return Err(BlobError::InvalidKey(format!(
            "{key:?}: expected relative path segments of [A-Za-z0-9._-], no '.', '..' or empty segment"
        )));
    }
    Ok(())
}

impl FileBlobStore {
    /// Opens (creating) the store rooted at `dir`, with
    /// [`Durability::Process`], and clears staging files a crash left.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, OpenError> {
        Self::open_with(dir, Durability::Process)
    }

    /// Like [`open`](Self::open) with a chosen durability.
    pub fn open_with(dir: impl AsRef<Path>, durability: Durability) -> Result<Self, OpenError> {
        let dir = dir.as_ref().to_owned();
        let staging = dir.join(STAGING_DIR);
        fs::create_dir_all(&staging).map_err(|source| OpenError::CreateDir {
            path: staging.clone(),
            source,
        })?;
        drop_stale_staging(&staging);
        Ok(FileBlobStore {
            inner: Arc::new(Root { dir, durability }),
        })
    }

    /// The root directory.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }
}

impl Root {
    fn path(&self, key: &str) -> PathBuf {
        // Validated keys contain only `/` as a separator, which every
        // platform accepts.
        self.dir.join(key)
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), BlobError> {
        let target = self.path(key);
        let parent = target.parent().unwrap_or(&self.dir).to_owned();
        fs::create_dir_all(&parent).map_err(|e| unavailable("creating directory", e))?;
        let staging = self
            .dir
            .join(STAGING_DIR)
            .join(uuid::Uuid::new_v4().simple().to_string());
        let written = (|| {
            let mut f = fs::File::create(&staging)?;
            f.write_all(bytes)?;
            // Without it a power loss can leave a renamed but empty file.
            f.sync_all()?;
            fs::rename(&staging, &target)
        })();
        if let Err(e) = written {
            let _ = fs::remove_file(&staging);
            return Err(unavailable("writing blob", e));
        }
        if self.durability == Durability::Full {
            fs::File::open(&parent)
                .and_then(|d| d.sync_all())
                .map_err(|e| unavailable("syncing directory", e))?;
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        match fs::read(self.path(key)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::IsADirectory
                        | io::ErrorKind::NotADirectory
                ) =>
            {
                Ok(None)
            }
            // Reading a directory fails with a platform-specific kind on
            // some systems; a directory is not a blob either way.
            Err(_) if self.path(key).is_dir() => Ok(None),
            Err(e) => Err(unavailable("reading blob", e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        // Start at the deepest directory the prefix names in full; a
        // prefix that cannot begin a valid key matches nothing.
        let (dir_part, _) = prefix.rsplit_once('/').unwrap_or(("", prefix));
        let start = if dir_part.is_empty() {
            if prefix.starts_with('/') {
                return Ok(Vec::new());
            }
            self.dir.clone()
        } else {
            if validate_key(dir_part).is_err() {
                return Ok(Vec::new());
            }
            self.dir.join(dir_part)
        };
        let mut keys = Vec::new();
        let base = if dir_part.is_empty() {
            String::new()
        } else {
            format!("{dir_part}/")
        };
        walk(&start, &base, prefix, &mut keys)?;
        keys.sort();
        Ok(keys)
    }
}

/// Collects the keys under `dir` (whose key prefix is `base`) that start
/// with `prefix`.
fn walk(dir: &Path, base: &str, prefix: &str, out: &mut Vec<String>) -> Result<(), BlobError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(())
        }
        Err(e) => return Err(unavailable("listing blobs", e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| unavailable("listing blobs", e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        if !valid_segment(&name) {
            continue;
        }
        let key = format!("{base}{name}");
        let kind = entry
            .file_type()
            .map_err(|e| unavailable("listing blobs", e))?;
        if kind.is_dir() {
            let sub = format!("{key}/");
            // Descend only where keys can still match the prefix.
            if sub.starts_with(prefix) || prefix.starts_with(&sub) {
                walk(&entry.path(), &sub, prefix, out)?;
            }
        } else if kind.is_file() && key.starts_with(prefix) {
            out.push(key);
        }
    }
    Ok(())
}

#[async_trait]
impl BlobStore for FileBlobStore {
    async fn put(&self, key: &str, bytes: Vec<u8>) -> Result<(), BlobError> {
        validate_key(key)?;
        let root = Arc::clone(&self.inner);
        let key = key.to_owned();
        blocking(move || root.put(&key, &bytes)).await
    }

    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, BlobError> {
        validate_key(key)?;
        let root = Arc::clone(&self.inner);
        let key = key.to_owned();
        blocking(move || root.get(&key)).await
    }

    async fn list(&self, prefix: &str) -> Result<Vec<String>, BlobError> {
        let root = Arc::clone(&self.inner);
        let prefix = prefix.to_owned();
        blocking(move || root.list(&prefix)).await
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, BlobError> + Send + 'static,
) -> Result<T, BlobError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| BlobError::Unavailable(format!("blob task failed: {e}")))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_drops_only_stale_staging_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileBlobStore::open(dir.path()).unwrap();
        let staging = dir.path().join(STAGING_DIR);
        let (fresh, old) = (staging.join("fresh"), staging.join("old"));
        fs::write(&fresh, b"in flight").unwrap();
        fs::write(&old, b"left by a crash").unwrap();
        let long_ago = std::time::SystemTime::now() - STALE_STAGING * 2;
        fs::File::options()
            .write(true)
            .open(&old)
            .and_then(|f| f.set_modified(long_ago))
            .unwrap();
        // A second handle on the same directory, as a command beside
        // `baton dev` opens.
        let _again = FileBlobStore::open(dir.path()).unwrap();
        assert!(fresh.exists(), "another handle's write in flight is kept");
        assert!(!old.exists(), "a crash's leftover is dropped");
        drop(store);
    }

    #[test]
    fn keys_are_validated() {
        for ok in [
            "a",
            "tasks/x/entries/0000000001.json",
            "a-b_c.d/e",
            "..a/b..",
        ] {
            assert!(validate_key(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "/abs", "a/../b", "..", ".", "a//b", "a/", "a b", "a\\b", "~tmp/x", "é", "a/./b",
        ] {
            assert!(
                matches!(validate_key(bad), Err(BlobError::InvalidKey(_))),
                "{bad:?}"
            );
        }
    }
}
