//! Files given with a task's input: what kind each is, and the transcript
//! entry that carries it to the model.
//!
//! Text-like files (plain text, Markdown, CSV, JSON, logs, source code)
//! reach the model as text; PNG, JPEG, GIF and WebP images as image blocks
//! and PDFs as document blocks, where the provider takes them; anything
//! else is named to the model as a file it cannot read. The bytes live in
//! the entry, which the store keeps in the blob store when it is large.

pub use crate::task::parts::PendingFile;
use crate::transcript::EntryKind;
use base64::Engine;

/// The default largest file accepted (`BATON_MAX_FILE_BYTES`): 10 MB.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1000 * 1000;
/// Most characters of a text file the model is given; the rest is cut
/// with a note.
pub const MAX_TEXT_CHARS: usize = 100_000;

/// The image types the providers take.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Extensions read as text whatever the media type says.
const TEXT_EXTENSIONS: &[&str] = &[
    "txt", "text", "md", "markdown", "csv", "tsv", "json", "jsonl", "ndjson", "log", "xml", "yaml",
    "yml", "toml", "ini", "cfg", "conf", "env", "html", "htm", "css", "sql", "sh", "bash", "zsh",
    "ps1", "bat", "py", "rb", "rs", "go", "java", "kt", "scala", "c", "h", "cc", "cpp", "hpp",
    "cs", "js", "mjs", "cjs", "ts", "tsx", "jsx", "php", "pl", "lua", "swift", "r", "m", "tf",
    "hcl", "proto", "graphql", "diff", "patch", "rst", "tex", "srt", "vtt",
];

/// `image/png` for `shot.png` and the like: the media type a file's name
/// suggests, when the sender named none (or only `application/octet-stream`).
fn guess_media_type(name: &str) -> Option<&'static str> {
    let ext = extension(name)?;
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "json" => "application/json",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        e if TEXT_EXTENSIONS.contains(&e) => "text/plain",
        _ => return None,
    })
}

fn extension(name: &str) -> Option<String> {
    let (_, ext) = name.rsplit_once('.')?;
    Some(ext.to_ascii_lowercase())
}

/// The media type to go by: the one given (lower-cased, without
/// parameters), or the one the name suggests when none useful was given.
pub fn media_type_of(name: &str, given: Option<&str>) -> String {
    let given = given
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if given.is_empty() || given == "application/octet-stream" || given == "binary/octet-stream" {
        guess_media_type(name)
            .map(str::to_owned)
            .unwrap_or_else(|| "application/octet-stream".to_owned())
    } else if given == "image/jpg" {
        "image/jpeg".to_owned()
    } else {
        given
    }
}

fn is_text_like(name: &str, media_type: &str) -> bool {
    media_type.starts_with("text/")
        || matches!(
            media_type,
            "application/json"
                | "application/x-ndjson"
                | "application/xml"
                | "application/yaml"
                | "application/x-yaml"
                | "application/toml"
                | "application/javascript"
                | "application/typescript"
                | "application/x-sh"
                | "application/sql"
        )
        || media_type.ends_with("+json")
        || media_type.ends_with("+xml")
        || extension(name).is_some_and(|e| TEXT_EXTENSIONS.contains(&e.as_str()))
}

/// A human size: `10 MB`, `512 KB`, `12 bytes`.
pub fn human_bytes(n: u64) -> String {
    if n >= 1000 * 1000 {
        format!("{:.1} MB", n as f64 / 1e6).replace(".0 MB", " MB")
    } else if n >= 1000 {
        format!("{} KB", n / 1000)
    } else {
        format!("{n} bytes")
    }
}

/// An attachment that is named to the model only, with why.
pub fn refused(name: &str, media_type: &str, bytes: u64, reason: impl Into<String>) -> EntryKind {
    EntryKind::Attachment {
        name: name.to_owned(),
        media_type: media_type.to_owned(),
        bytes,
        text: None,
        data_base64: None,
        note: Some(reason.into()),
    }
}

/// The entry for a file's bytes: text, an image or a PDF kept for the
/// model, or (too large, unsupported, not UTF-8 text) named with a note.
pub fn from_bytes(name: &str, given_type: Option<&str>, data: &[u8], max_bytes: u64) -> EntryKind {
    let media_type = media_type_of(name, given_type);
    let bytes = data.len() as u64;
    if bytes > max_bytes {
        return refused(name, &media_type, bytes, too_large(bytes, max_bytes));
    }
    let base64 = || base64::engine::general_purpose::STANDARD.encode(data);
    let kept = |text: Option<String>, data_base64: Option<String>| EntryKind::Attachment {
        name: name.to_owned(),
        media_type: media_type.clone(),
        bytes,
        text,
        data_base64,
        note: None,
    };
    if IMAGE_TYPES.contains(&media_type.as_str()) || media_type == "application/pdf" {
        return kept(None, Some(base64()));
    }
    if is_text_like(name, &media_type) {
        return match std::str::from_utf8(data) {
            Ok(text) => kept(Some(cut(text)), None),
            Err(_) => refused(name, &media_type, bytes, "it is not UTF-8 text"),
        };
    }
    refused(
        name,
        &media_type,
        bytes,
        format!(
            "files of type {media_type} are not supported (text, PNG, JPEG, GIF, WebP and PDF are)"
        ),
    )
}

/// Why a file of `bytes` was not taken under a limit of `max_bytes`.
pub fn too_large(bytes: u64, max_bytes: u64) -> String {
    format!(
        "it is {}, larger than the {} limit for files",
        human_bytes(bytes),
        human_bytes(max_bytes)
    )
}

/// Keeps an attachment entry for a running task in the blob store, with
/// the task's other blobs, and returns the pending file that points at it:
/// the task record holds only the reference.
pub async fn stash(
    blobs: &dyn crate::BlobStore,
    task: &crate::TaskId,
    entry: &EntryKind,
) -> Result<PendingFile, crate::BlobError> {
    let EntryKind::Attachment {
        name,
        media_type,
        bytes,
        ..
    } = entry
    else {
        return Err(crate::BlobError::Unavailable(
            "only attachments are stashed".to_owned(),
        ));
    };
    let id = uuid::Uuid::new_v4().simple().to_string();
    let key = format!("tasks/{task}/files/{id}.json");
    let data = serde_json::to_vec(entry)
        .map_err(|e| crate::BlobError::Unavailable(format!("attachment unencodable: {e}")))?;
    blobs.put(&key, data).await?;
    Ok(PendingFile {
        id,
        name: name.clone(),
        media_type: Some(media_type.clone()),
        size: *bytes,
        url: String::new(),
        stashed: Some(key),
    })
}

/// The entry [`stash`] kept for `file`, or the file named with why it is
/// gone. An unavailable store is an error: the caller retries.
pub async fn unstash(
    blobs: &dyn crate::BlobStore,
    file: &PendingFile,
    key: &str,
) -> Result<EntryKind, crate::BlobError> {
    let media_type = media_type_of(&file.name, file.media_type.as_deref());
    let gone = || {
        refused(
            &file.name,
            &media_type,
            file.size,
            "it was lost before the task read it",
        )
    };
    Ok(match blobs.get(key).await? {
        Some(data) => serde_json::from_slice(&data).unwrap_or_else(|_| gone()),
        None => gone(),
    })
}

/// Why a file could not be fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// Larger than allowed: at least `bytes`.
    #[error("too large ({bytes} bytes)")]
    TooLarge {
        /// The size announced, or the bytes read when the limit was passed.
        bytes: u64,
    },
    /// Anything else, readable by the user.
    #[error("{0}")]
    Failed(String),
}

/// Downloads the files messages carry (Slack's, with the bot token).
#[async_trait::async_trait]
pub trait FileSource: Send + Sync {
    /// The bytes at `url`, refused beyond `max_bytes`.
    async fn fetch(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, FetchError>;
}

/// The entry for a pending file: its content when `source` could fetch it
/// within `max_bytes`, else named to the model with why not.
pub async fn take_pending(
    file: &PendingFile,
    source: Option<&dyn FileSource>,
    max_bytes: u64,
) -> EntryKind {
    let media_type = media_type_of(&file.name, file.media_type.as_deref());
    if file.size > max_bytes {
        return refused(
            &file.name,
            &media_type,
            file.size,
            too_large(file.size, max_bytes),
        );
    }
    let Some(source) = source else {
        let why = "it could not be downloaded: no Slack bot token is configured";
        return refused(&file.name, &media_type, file.size, why);
    };
    if file.url.is_empty() {
        let why = "it could not be downloaded: Slack gave no download link";
        return refused(&file.name, &media_type, file.size, why);
    }
    match source.fetch(&file.url, max_bytes).await {
        Ok(data) => from_bytes(&file.name, file.media_type.as_deref(), &data, max_bytes),
        Err(FetchError::TooLarge { bytes }) => {
            let bytes = bytes.max(file.size);
            refused(&file.name, &media_type, bytes, too_large(bytes, max_bytes))
        }
        Err(FetchError::Failed(e)) => refused(
            &file.name,
            &media_type,
            file.size,
            format!("it could not be downloaded: {e}"),
        ),
    }
}

fn cut(text: &str) -> String {
    let total = text.chars().count();
    if total <= MAX_TEXT_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(MAX_TEXT_CHARS).collect();
    format!(
        "{kept}\n[… {} more characters of this file were cut]",
        total - MAX_TEXT_CHARS
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_told_apart_by_type_and_name() {
        let text = from_bytes("notes.md", None, b"# hi", 100);
        assert!(
            matches!(&text, EntryKind::Attachment { text: Some(t), media_type, .. } if t == "# hi" && media_type == "text/markdown")
        );
        let code = from_bytes(
            "main.rs",
            Some("application/octet-stream"),
            b"fn main(){}",
            100,
        );
        assert!(matches!(&code, EntryKind::Attachment { text: Some(_), .. }));
        let png = from_bytes("a.png", Some("image/png"), &[0x89, b'P'], 100);
        assert!(matches!(&png, EntryKind::Attachment { data_base64: Some(d), .. } if d == "iVA="));
        let zip = from_bytes("a.zip", Some("application/zip"), b"PK", 100);
        assert!(
            matches!(&zip, EntryKind::Attachment { note: Some(n), .. } if n.contains("application/zip are not supported"))
        );
        let big = from_bytes("a.txt", None, &[b'x'; 101], 100);
        assert!(
            matches!(&big, EntryKind::Attachment { note: Some(n), .. } if n.contains("larger than the 100 bytes limit"))
        );
        let latin1 = from_bytes("a.txt", None, &[0xff, 0xfe], 100);
        assert!(
            matches!(&latin1, EntryKind::Attachment { note: Some(n), .. } if n.contains("not UTF-8"))
        );
    }

    struct Files;

    #[async_trait::async_trait]
    impl FileSource for Files {
        async fn fetch(&self, url: &str, max_bytes: u64) -> Result<Vec<u8>, FetchError> {
            match url {
                "ok" => Ok(b"hello".to_vec()),
                "grew" => Err(FetchError::TooLarge {
                    bytes: max_bytes + 1,
                }),
                _ => Err(FetchError::Failed("Slack answered HTTP 404".into())),
            }
        }
    }

    fn pending(name: &str, size: u64, url: &str) -> PendingFile {
        PendingFile {
            id: "F1".into(),
            name: name.into(),
            media_type: None,
            size,
            url: url.into(),
            stashed: None,
        }
    }

    fn note(entry: EntryKind) -> Option<String> {
        match entry {
            EntryKind::Attachment { note, .. } => note,
            _ => panic!("an attachment"),
        }
    }

    #[tokio::test]
    async fn pending_files_are_taken_or_named_with_why() {
        let src: Option<&dyn FileSource> = Some(&Files);
        let ok = take_pending(&pending("a.txt", 5, "ok"), src, 100).await;
        assert!(matches!(&ok, EntryKind::Attachment { text: Some(t), .. } if t == "hello"));
        let big = note(take_pending(&pending("a.txt", 5000, "ok"), src, 1000).await).unwrap();
        assert!(big.contains("5 KB, larger than the 1 KB limit"), "{big}");
        let grew = note(take_pending(&pending("a.txt", 5, "grew"), src, 1000).await).unwrap();
        assert!(grew.contains("larger than the 1 KB limit"), "{grew}");
        let gone = note(take_pending(&pending("a.txt", 5, "gone"), src, 100).await).unwrap();
        assert_eq!(gone, "it could not be downloaded: Slack answered HTTP 404");
        let none = note(take_pending(&pending("a.txt", 5, "ok"), None, 100).await).unwrap();
        assert!(none.contains("no Slack bot token"), "{none}");
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_bytes(10_000_000), "10 MB");
        assert_eq!(human_bytes(1_500_000), "1.5 MB");
        assert_eq!(human_bytes(2048), "2 KB");
    }
}
