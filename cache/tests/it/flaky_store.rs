//! Writes to an S3 store survive a flaky network: moto's S3 (never real
//! AWS; `CSIS_MOTO_URL`, skipped loudly when it does not answer, a failure
//! under `CSIS_REQUIRE_MOTO`) behind a loopback proxy that drops every
//! third connection it accepts. Conditional creates, conditional updates
//! (the lease's writes) and records all go through: a request that fails
//! on the way is sent again, and a retried conditional write that finds its
//! own bytes there is recognised as having succeeded. And the reads of one
//! load overlap (a proxy that counts the connections open at once).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use csis_cache::lease::Leases;
use csis_cache::objstore::{Cond, Store};
use csis_schema::model::MetaStateSpec;

fn moto() -> Option<String> {
    let url = std::env::var("CSIS_MOTO_URL").unwrap_or_else(|_| "http://127.0.0.1:5000".into());
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    if TcpStream::connect(&addr).is_err() {
        if std::env::var_os("CSIS_REQUIRE_MOTO").is_some() {
            panic!("moto is not answering on {url} and CSIS_REQUIRE_MOTO is set");
        }
        eprintln!("*** SKIPPED: moto is not answering on {url}; start it with runtimes/aws/tests/moto.sh ***");
        return None;
    }
    Some(addr)
}

/// What a [`proxy`] saw: connections dropped on purpose, connections open
/// through it now, the most ever open at once.
#[derive(Default)]
struct Seen {
    dropped: AtomicUsize,
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A proxy on 127.0.0.1 to `upstream` that closes every `nth` connection
/// at once (the client sees it dropped; `None`: none) and counts the
/// connections open through it in `seen`; its address.
fn proxy(upstream: String, nth: Option<usize>, seen: Arc<Seen>) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for (i, c) in l.incoming().enumerate() {
            let Ok(c) = c else { continue };
            if nth.is_some_and(|n| (i + 1) % n == 0) {
                seen.dropped.fetch_add(1, Ordering::SeqCst);
                drop(c);
                continue;
            }
            let Ok(u) = TcpStream::connect(&upstream) else {
                continue;
            };
            let open = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
            seen.most.fetch_max(open, Ordering::SeqCst);
            let pipe = |mut a: TcpStream, mut b: TcpStream| {
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = a.read(&mut buf) {
                        if n == 0 || b.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = b.shutdown(std::net::Shutdown::Both);
                })
            };
            let up = pipe(c.try_clone().unwrap(), u.try_clone().unwrap());
            let down = pipe(u, c);
            let seen = seen.clone();
            std::thread::spawn(move || {
                let _ = (up.join(), down.join());
                seen.now.fetch_sub(1, Ordering::SeqCst);
            });
        }
    });
    addr
}

/// A store on `bucket` of moto, reached through `proxy` (the process's
/// environment untouched: the other tests of this binary share it).
fn store_behind(proxy: &str, bucket: &str) -> Store {
    let endpoint = format!("http://{proxy}");
    let env = |k: &str| match k {
        "AWS_ENDPOINT_URL" => Some(endpoint.clone()),
        "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" => Some("testing".to_string()),
        "AWS_REGION" => Some("us-east-1".to_string()),
        _ => None,
    };
    let spec = MetaStateSpec::parse(&format!("s3://{bucket}/tree")).unwrap();
    Store::open_with(&spec, &env).unwrap().unwrap()
}

/// Create a bucket on moto (it takes an unsigned request).
fn make_bucket(addr: &str, bucket: &str) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "PUT /{bucket} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
}

#[test]
fn store_writes_survive_dropped_connections() {
    let Some(addr) = moto() else { return };
    let bucket = format!("csis-flaky-{}", std::process::id());
    make_bucket(&addr, &bucket);
    let seen = Arc::new(Seen::default());
    let proxy = proxy(addr, Some(3), seen.clone());
    let s = Arc::new(store_behind(&proxy, &bucket));
    for i in 0..10 {
        let key = format!("k/{i}.json");
        let v = s
            .put(&key, format!("one {i}").into_bytes(), Cond::Create)
            .unwrap_or_else(|e| panic!("create {key}: {e}"));
        let v2 = s
            .put(
                &key,
                format!("two {i}").into_bytes(),
                Cond::Match(v.clone()),
            )
            .unwrap_or_else(|e| panic!("update {key}: {e}"));
        // the version moved: an update on the old one is a conflict still
        assert!(s
            .put(&key, b"three".to_vec(), Cond::Match(v))
            .is_err_and(|e| matches!(e, csis_cache::objstore::StoreError::Conflict)));
        assert_eq!(
            s.get(&key).unwrap().unwrap().0,
            format!("two {i}").into_bytes()
        );
        let _ = v2;
    }
    // a lease taken and let go, ten times
    for i in 0..10 {
        let l = Leases::new(s.clone(), &format!("run-{i}"));
        let key = ("img".to_string(), "rt".to_string());
        l.acquire(&[key], &Default::default(), false, &|_| {})
            .unwrap_or_else(|e| panic!("lease {i}: {e}"));
        drop(l);
    }
    assert!(s.list("leases").unwrap().is_empty(), "every lease let go");
    assert!(
        seen.dropped.load(Ordering::SeqCst) > 0,
        "the proxy dropped connections"
    );
}

#[test]
fn the_reads_of_one_load_overlap() {
    let Some(addr) = moto() else { return };
    let bucket = format!("csis-overlap-{}", std::process::id());
    make_bucket(&addr, &bucket);
    // 24 series objects, written one after another
    let seen = Arc::new(Seen::default());
    let proxy = proxy(addr, None, seen.clone());
    let s = store_behind(&proxy, &bucket);
    for i in 0..24 {
        s.put(
            &format!("series/s{i:02}.json"),
            b"{}".to_vec(),
            Cond::Create,
        )
        .unwrap();
    }
    let written = seen.most.load(Ordering::SeqCst);
    // a load: the list, then a get per object, pins and lineage
    let before = s.requests();
    let (lineage, _) = csis_cache::remote::read_records(&s).unwrap();
    assert!(lineage.builds.is_empty());
    assert_eq!(s.requests() - before, 1 + 24 + 2, "one list and a get each");
    assert!(
        seen.most.load(Ordering::SeqCst) > written.max(1),
        "the gets overlapped: at most {} connection(s) open at once (the writes: {written})",
        seen.most.load(Ordering::SeqCst)
    );
}

#[test]
fn the_leases_of_one_selection_are_taken_at_once_and_in_order_when_one_is_held() {
    let Some(addr) = moto() else { return };
    let bucket = format!("csis-lease-overlap-{}", std::process::id());
    make_bucket(&addr, &bucket);
    let seen = Arc::new(Seen::default());
    let proxy = proxy(addr, None, seen.clone());
    let s = Arc::new(store_behind(&proxy, &bucket));
    let keys: Vec<(String, String)> = (0..12)
        .map(|i| (format!("s{i:02}"), "rt".to_string()))
        .collect();
    // another runner holds s05: this one keeps s00..s04 (a prefix of the
    // sorted keys), lets go of what it took after s05, and says it is held
    let other = Leases::new(s.clone(), "run-other");
    other
        .acquire(&keys[5..6], &Default::default(), false, &|_| {})
        .unwrap();
    let before = seen.most.load(Ordering::SeqCst);
    let l = Leases::new(s.clone(), "run-one");
    let refused = l.acquire(&keys, &Default::default(), false, &|_| {});
    assert!(
        matches!(refused, Err(csis_cache::CacheError::Locked { .. })),
        "{refused:?}"
    );
    assert!(
        seen.most.load(Ordering::SeqCst) > before.max(1),
        "the creates overlapped: at most {} connection(s) open at once",
        seen.most.load(Ordering::SeqCst)
    );
    let mut held = l.keys();
    held.sort();
    assert_eq!(
        held,
        keys[..5].to_vec(),
        "a prefix of the sorted keys, no more"
    );
    let mut on_store = s.list("leases").unwrap();
    on_store.sort();
    assert_eq!(
        on_store.len(),
        6,
        "s00..s04 and the other's s05: {on_store:?}"
    );
    // once the other lets go, every lease is this runner's
    drop(other);
    l.acquire(&keys, &Default::default(), false, &|_| {})
        .unwrap();
    assert_eq!(l.keys().len(), 12);
    drop(l);
    assert!(s.list("leases").unwrap().is_empty(), "every lease let go");
}
