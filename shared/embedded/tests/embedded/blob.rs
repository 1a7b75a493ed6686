use baton_core::{BlobError, BlobStore};
use baton_embedded::FileBlobStore;

fn open() -> (tempfile::TempDir, FileBlobStore) {
    let dir = tempfile::tempdir().unwrap();
    let blobs = FileBlobStore::open(dir.path().join("blobs")).unwrap();
    (dir, blobs)
}

#[tokio::test]
async fn put_get_overwrite() {
    let (_dir, b) = open();
    assert_eq!(b.get("traces/t1.json").await.unwrap(), None);
    b.put("traces/t1.json", b"one".to_vec()).await.unwrap();
    assert_eq!(b.get("traces/t1.json").await.unwrap().unwrap(), b"one");
    b.put("traces/t1.json", b"two!".to_vec()).await.unwrap();
    assert_eq!(b.get("traces/t1.json").await.unwrap().unwrap(), b"two!");
    b.put("empty", Vec::new()).await.unwrap();
    assert_eq!(b.get("empty").await.unwrap().unwrap(), b"");
    // A directory is not a blob.
    assert_eq!(b.get("traces").await.unwrap(), None);
    // No staging files are left behind.
    let staging = b.dir().join("~tmp");
    assert_eq!(std::fs::read_dir(staging).unwrap().count(), 0);
}

#[tokio::test]
async fn invalid_keys_are_refused_everywhere() {
    let (dir, b) = open();
    for key in [
        "",
        "/etc/passwd",
        "../escape",
        "a/../../b",
        "a//b",
        "a/",
        "sp ace",
        "~tmp/x",
    ] {
        assert!(
            matches!(
                b.put(key, b"x".to_vec()).await,
                Err(BlobError::InvalidKey(_))
            ),
            "put {key:?}"
        );
        assert!(
            matches!(b.get(key).await, Err(BlobError::InvalidKey(_))),
            "get {key:?}"
        );
    }
    assert!(!dir.path().join("escape").exists());
}

#[tokio::test]
async fn list_is_sorted_and_prefix_filtered() {
    let (_dir, b) = open();
    for key in [
        "tasks/b/entries/0000000002.json",
        "tasks/a/trace.json",
        "tasks/b/entries/0000000001.json",
        "tasks/ab/trace.json",
        "tasks-other",
        "top",
    ] {
        b.put(key, key.as_bytes().to_vec()).await.unwrap();
    }
    assert_eq!(
        b.list("").await.unwrap(),
        [
            "tasks-other",
            "tasks/a/trace.json",
            "tasks/ab/trace.json",
            "tasks/b/entries/0000000001.json",
            "tasks/b/entries/0000000002.json",
            "top",
        ]
    );
    assert_eq!(
        b.list("tasks/a").await.unwrap(),
        ["tasks/a/trace.json", "tasks/ab/trace.json"]
    );
    assert_eq!(b.list("tasks/a/").await.unwrap(), ["tasks/a/trace.json"]);
    assert_eq!(
        b.list("tasks/b/entries/").await.unwrap(),
        [
            "tasks/b/entries/0000000001.json",
            "tasks/b/entries/0000000002.json"
        ]
    );
    assert_eq!(b.list("tasks").await.unwrap().len(), 5);
    assert!(b.list("nope/").await.unwrap().is_empty());
    assert!(b.list("../").await.unwrap().is_empty());
    assert!(b.list("/").await.unwrap().is_empty());
}

#[tokio::test]
async fn blobs_survive_reopen_and_stale_staging_is_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("blobs");
    {
        let b = FileBlobStore::open(&root).unwrap();
        b.put("a/b", vec![1, 2, 3]).await.unwrap();
    }
    // A write a crash left half done, an hour and more ago (a younger one
    // may be another handle's write in flight, and is kept).
    let leftover = root.join("~tmp").join("leftover");
    std::fs::write(&leftover, b"partial").unwrap();
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    std::fs::File::options()
        .write(true)
        .open(&leftover)
        .and_then(|f| f.set_modified(long_ago))
        .unwrap();
    let b = FileBlobStore::open(&root).unwrap();
    assert_eq!(b.get("a/b").await.unwrap().unwrap(), [1, 2, 3]);
    assert_eq!(b.list("").await.unwrap(), ["a/b"]);
    assert_eq!(std::fs::read_dir(root.join("~tmp")).unwrap().count(), 0);
}
