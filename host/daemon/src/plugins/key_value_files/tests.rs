use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::*;

/// The budget of a call that has not written yet: each write below is its own call
/// unless a test says otherwise.
const CALL: DiskBudget = DiskBudget::per_call();

fn small_limits() -> KeyValueLimits {
    KeyValueLimits {
        max_key_bytes: 8,
        max_value_bytes: 16,
        max_total_bytes: 40,
    }
}

#[test]
fn survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    assert_eq!(store.get("lb-drain", "drained"), None);
    store
        .set("lb-drain", "drained", b"\x00\xffyes", CALL)
        .expect("sets");
    store.set("lb-drain", "gone", b"1", CALL).expect("sets");
    store.delete("lb-drain", "gone", CALL).expect("deletes");
    drop(store);
    let reopened = KeyValueFiles::open(dir.path()).expect("reopens");
    assert_eq!(
        reopened.get("lb-drain", "drained"),
        Some(b"\x00\xffyes".to_vec())
    );
    assert_eq!(reopened.get("lb-drain", "gone"), None);
    assert!(dir.path().join("lb-drain.json").exists());
}

#[test]
fn two_plugins_are_isolated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    store.set("checkpoint", "k", b"one", CALL).expect("sets");
    store.set("lb-drain", "k", b"two", CALL).expect("sets");
    store.delete("lb-drain", "k", CALL).expect("deletes");
    assert_eq!(store.get("checkpoint", "k"), Some(b"one".to_vec()));
    assert_eq!(store.get("lb-drain", "k"), None);
    let reopened = KeyValueFiles::open(dir.path()).expect("reopens");
    assert_eq!(reopened.get("checkpoint", "k"), Some(b"one".to_vec()));
    assert_eq!(reopened.get("lb-drain", "k"), None);
}

#[test]
fn quotas_are_enforced_and_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open_with_limits(dir.path(), small_limits()).expect("opens");

    let long_key = store
        .set("p", "123456789", b"v", CALL)
        .expect_err("key too long");
    assert!(long_key.to_string().contains("max-key-bytes"), "{long_key}");

    let big_value = store
        .set("p", "k", &[0; 17], CALL)
        .expect_err("value too big");
    assert!(
        big_value.to_string().contains("max-value-bytes"),
        "{big_value}"
    );

    store.set("p", "a", &[1; 16], CALL).expect("17 bytes");
    store.set("p", "b", &[2; 16], CALL).expect("34 bytes");
    let total = store
        .set("p", "c", &[3; 16], CALL)
        .expect_err("51 bytes is over 40");
    assert!(matches!(total, KeyValueFilesError::OverQuota { .. }));
    assert!(total.to_string().contains("max-total-bytes"), "{total}");
    assert_eq!(store.get("p", "c"), None, "nothing stored on failure");

    store
        .set("p", "b", &[2; 5], CALL)
        .expect("replacing shrinks: 23 bytes");
    store
        .set("p", "c", &[3; 16], CALL)
        .expect("40 bytes fits exactly");
    assert_eq!(store.usage("p"), 40);
    assert_eq!(store.usage("other"), 0);
}

#[test]
fn default_limits_match_the_contract() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    store
        .set("p", &"k".repeat(256), &[0; 64 * 1024], CALL)
        .expect("at the limits");
    assert!(store.set("p", &"k".repeat(257), b"", CALL).is_err());
    assert!(store.set("p", "k", &[0; 64 * 1024 + 1], CALL).is_err());
}

/// A writer that counts the bytes it writes into `written`, then writes them.
fn counting_writer(written: Arc<AtomicU64>) -> Arc<WriteFile> {
    Arc::new(move |path: &Path, bytes: &[u8]| {
        written.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        durable_file::write_atomically(path, bytes)
    })
}

/// A clock that moves a minute on at every look: the disk write budget never runs out.
fn a_minute_per_look() -> Arc<Clock> {
    let start = Instant::now();
    let looks = AtomicU64::new(0);
    Arc::new(move || start + Duration::from_secs(60 * looks.fetch_add(1, Ordering::SeqCst)))
}

#[test]
fn many_small_writes_in_one_call_rewrite_a_full_state_file_only_within_the_budget() {
    let dir = tempfile::tempdir().expect("tempdir");
    let written = Arc::new(AtomicU64::new(0));
    let store = KeyValueFiles::open(dir.path())
        .expect("opens")
        .with_writer(counting_writer(written.clone()))
        .with_clock(a_minute_per_look());
    // Near the 1 MiB quota: a state file of about 2 MiB (values are stored as hex).
    for index in 0..15 {
        let key = format!("blob-{index}");
        store
            .set("p", &key, &[0xab; 64 * 1024], CALL)
            .expect("fits");
    }
    let before = written.load(Ordering::SeqCst);

    // One call: 64 one-byte writes, each changing the value.
    let mut budget = CALL;
    let mut landed = 0;
    for index in 0..64u8 {
        match store.set("p", "flip", &[index % 2], budget) {
            Ok(0) => {} // the value it holds already: nothing written
            Ok(bytes) => {
                budget = budget.after(bytes);
                landed += 1;
            }
            Err(KeyValueFilesError::OverQuota { detail, .. }) => {
                assert!(detail.contains("bytes of state per call"), "{detail}");
            }
            Err(error) => panic!("write {index}: {error}"),
        }
    }

    let in_the_call = written.load(Ordering::SeqCst) - before;
    assert!(
        in_the_call <= STATE_DISK_BYTES_PER_CALL,
        "one call wrote {in_the_call} bytes"
    );
    // Every rewrite is the same size: as many land as fit in the budget.
    let file_bytes = fs::metadata(dir.path().join("p.json")).expect("stat").len();
    assert!(file_bytes > 1024 * 1024, "{file_bytes}");
    assert_eq!(landed, STATE_DISK_BYTES_PER_CALL / file_bytes);
    let reopened = KeyValueFiles::open(dir.path()).expect("reopens");
    assert_eq!(reopened.get("p", "flip"), store.get("p", "flip"));
}

/// A writer that says when a write has begun, then blocks it (as a slow disk's fsync
/// would) until the test releases it.
fn blocking_writer() -> (Arc<WriteFile>, mpsc::Receiver<()>, mpsc::Sender<()>) {
    let (entered, write_began) = mpsc::channel();
    let (release, released) = mpsc::channel();
    let released = Mutex::new(released);
    let writer = Arc::new(move |path: &Path, bytes: &[u8]| {
        entered.send(()).expect("the test waits for the write");
        lock(&released).recv().expect("the test releases the write");
        durable_file::write_atomically(path, bytes)
    });
    (writer, write_began, release)
}

#[test]
fn a_read_does_not_wait_for_a_write_stuck_on_the_disk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    store.set("p", "k", b"old", CALL).expect("sets");
    drop(store);
    let (writer, write_began, release) = blocking_writer();
    let store = Arc::new(
        KeyValueFiles::open(dir.path())
            .expect("reopens")
            .with_writer(writer),
    );
    let writing = thread::spawn({
        let store = Arc::clone(&store);
        move || store.set("p", "k", b"new", CALL)
    });
    write_began.recv().expect("the write began");

    // The write holds the plugin's write lock and is stuck in its file write.
    let (read_done, read) = mpsc::channel();
    thread::spawn({
        let store = Arc::clone(&store);
        move || read_done.send(store.get("p", "k"))
    });
    let read = read.recv_timeout(Duration::from_secs(10));
    release.send(()).expect("the write is waiting");
    assert_eq!(
        read,
        Ok(Some(b"old".to_vec())),
        "the read waited for the write"
    );

    writing
        .join()
        .expect("the writer")
        .expect("the write lands");
    assert_eq!(store.get("p", "k"), Some(b"new".to_vec()));
}

#[test]
fn invalid_plugin_names_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    let long = "a".repeat(65);
    for name in [
        "",
        "../etc",
        "a/b",
        "Upper",
        "dot.name",
        "space name",
        long.as_str(),
    ] {
        let error = store.set(name, "k", b"v", CALL).expect_err(name);
        assert!(
            matches!(error, KeyValueFilesError::InvalidPluginName { .. }),
            "{name:?}: {error}"
        );
        assert!(error.to_string().contains("a-z, 0-9"), "{error}");
        assert!(store.delete(name, "k", CALL).is_err());
        assert_eq!(store.get(name, "k"), None);
    }
    assert!(validate_plugin_name(&"a".repeat(64)).is_ok());
    assert!(validate_plugin_name("lb_drain-2").is_ok());
    let entries = fs::read_dir(dir.path()).expect("lists").count();
    assert_eq!(entries, 0, "nothing was written");
}

#[test]
fn corrupt_plugin_file_is_quarantined_and_others_load() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = KeyValueFiles::open(dir.path()).expect("opens");
    store.set("good", "k", b"v", CALL).expect("sets");
    drop(store);
    fs::write(dir.path().join("bad.json"), b"{\"k\": \"not hex\"}").expect("writes");
    fs::write(dir.path().join("good.json.tmp"), b"{\"k\": \"00").expect("writes");
    let store = KeyValueFiles::open(dir.path()).expect("opens despite a bad file");
    assert_eq!(store.get("good", "k"), Some(b"v".to_vec()));
    assert_eq!(store.get("bad", "k"), None);
    assert!(!dir.path().join("bad.json").exists());
    assert!(!dir.path().join("good.json.tmp").exists());
    store
        .set("bad", "k", b"fresh", CALL)
        .expect("the plugin starts over");
}

#[test]
fn concurrent_writers_all_land() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(KeyValueFiles::open(dir.path()).expect("opens"));
    let writers: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|plugin| {
            let store = Arc::clone(&store);
            thread::spawn(move || {
                for i in 0..50 {
                    store
                        .set(plugin, &format!("k{i}"), &[i], CALL)
                        .expect("sets");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("writer finished");
    }
    let reopened = KeyValueFiles::open(dir.path()).expect("reopens");
    for plugin in ["alpha", "beta"] {
        for i in 0..50u8 {
            assert_eq!(reopened.get(plugin, &format!("k{i}")), Some(vec![i]));
        }
    }
}

/// A writer that fails with `error` while `failing` is set, else writes.
fn failing_writer(failing: Arc<AtomicBool>) -> Arc<WriteFile> {
    Arc::new(move |path: &Path, bytes: &[u8]| {
        if failing.load(Ordering::SeqCst) {
            return Err(DurableFileError::io(
                "create",
                &durable_file::tmp_path(path),
                std::io::Error::from(std::io::ErrorKind::StorageFull),
            ));
        }
        durable_file::write_atomically(path, bytes)
    })
}

#[test]
fn a_disk_that_refuses_fails_the_write_with_its_fix_reads_still_answer_and_it_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let failing = Arc::new(AtomicBool::new(false));
    let health = Arc::new(StorageHealth::default());
    let store = KeyValueFiles::open(dir.path())
        .expect("opens")
        .with_writer(failing_writer(failing.clone()))
        .with_health(health.clone());
    store.set("p", "k", b"old", CALL).expect("sets");
    failing.store(true, Ordering::SeqCst);
    let error = store
        .set("p", "k", b"new", CALL)
        .expect_err("the disk is full");
    let text = error.to_string();
    assert!(text.contains("was not stored"), "{text}");
    assert!(text.contains("disk is full: free some space"), "{text}");
    assert_eq!(store.get("p", "k"), Some(b"old".to_vec()), "reads answer");
    let during = health.plugin_state();
    assert!(!during.writable);
    assert_eq!(during.write_failures, 1);
    assert!(
        during
            .last_error
            .is_some_and(|e| e.contains("disk is full"))
    );

    failing.store(false, Ordering::SeqCst);
    store.set("p", "k", b"new", CALL).expect("room again");
    assert!(health.plugin_state().writable);
    let reopened = KeyValueFiles::open(dir.path()).expect("reopens");
    assert_eq!(reopened.get("p", "k"), Some(b"new".to_vec()));
}

#[test]
fn a_plugin_over_its_disk_write_budget_is_refused_until_it_refills() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = Instant::now();
    let now = Arc::new(Mutex::new(start));
    let clock = {
        let now = now.clone();
        Arc::new(move || *lock(&now))
    };
    let health = Arc::new(StorageHealth::default());
    let store = KeyValueFiles::open(dir.path())
        .expect("opens")
        .with_clock(clock)
        .with_health(health.clone());
    // Each write a new call (the per-call limits are not what is tested here).
    let mut landed = 0;
    let refused = loop {
        match store.set("hammer", "k", &[landed as u8, 1], CALL) {
            Ok(_) => landed += 1,
            Err(error) => break error,
        }
        assert!(landed <= 1000, "never refused");
    };
    assert_eq!(landed, STATE_WRITE_BURST);
    assert!(
        matches!(refused, KeyValueFilesError::OverWriteBudget { .. }),
        "{refused}"
    );
    let text = refused.to_string();
    assert!(
        text.contains("disk write budget of 120 state writes"),
        "{text}"
    );
    assert!(text.contains("the next is allowed in 500ms"), "{text}");
    assert_eq!(health.plugin_state().refused_over_budget["hammer"], 1);
    // Another plugin is not held back by it.
    store.set("quiet", "k", b"v", CALL).expect("its own budget");
    // Two a second once the burst is spent.
    *lock(&now) = start + Duration::from_millis(500);
    store.set("hammer", "k", b"later", CALL).expect("refilled");
    assert!(store.set("hammer", "k", b"again", CALL).is_err());
    assert_eq!(store.get("hammer", "k"), Some(b"later".to_vec()));
}
