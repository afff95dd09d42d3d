//! What a new user meets first: short timeouts on free locks, and names whose braces
//! are a typo.

mod common;

use std::time::Duration;

use cluster_rwlock::{Error, Mode};
use common::{assert_no_keys, client, cluster, prefix};

/// A timeout bounds the wait for the lock, not the first attempt: zero and timeouts of a
/// few milliseconds are granted on a free lock, every time, on new clients, in every
/// mode and for multi-locks, with the default configuration (grants confirmed by the
/// replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_and_short_timeouts_on_free_locks_are_granted() {
    let cluster = cluster().await;
    let p = prefix("zero-timeout");
    let mut refused = Vec::new();
    for i in 0..100u64 {
        let client = client(cluster, &p).await;
        let timeout = Duration::from_millis(i % 6);
        let name = format!("free-{i}");
        let lock = client.rwlock(&name).unwrap();
        // each grant released (and awaited) before the client closes
        let outcome = match i % 4 {
            0 => match lock.write_timeout(timeout).await {
                Ok(g) => g.release().await,
                Err(e) => Err(e),
            },
            1 => match lock.read_timeout(timeout).await {
                Ok(g) => g.release().await,
                Err(e) => Err(e),
            },
            2 => match lock.upgradable_read_timeout(timeout).await {
                Ok(g) => g.release().await,
                Err(e) => Err(e),
            },
            _ => {
                let other = format!("other-{i}");
                let multi = client
                    .multi([(name.as_str(), Mode::Write), (other.as_str(), Mode::Read)])
                    .unwrap();
                match multi.lock_timeout(timeout).await {
                    Ok(g) => g.release().await,
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = outcome {
            refused.push(format!("{i} ({timeout:?}): {e}"));
        }
        client.close().await;
    }
    assert!(refused.is_empty(), "refused on free locks: {refused:?}");
    assert_no_keys(cluster, &p).await;
}

/// A zero timeout on a held lock is one attempt: refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_timeout_on_a_held_lock_is_refused_at_once() {
    let cluster = cluster().await;
    let p = prefix("zero-held");
    let client = client(cluster, &p).await;
    let held = client.rwlock("held").unwrap().write().await.unwrap();
    let began = std::time::Instant::now();
    let r = client
        .rwlock("held")
        .unwrap()
        .write_timeout(Duration::ZERO)
        .await;
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    assert!(began.elapsed() < Duration::from_millis(150));
    held.release().await.unwrap();
    client.close().await;
    assert_no_keys(cluster, &p).await;
}

/// Braces that cannot be what was meant are refused with a typed error; a legal name
/// whose tag differs from the data's is caught by `same_slot_as`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typos_in_a_hashtag_are_caught() {
    let cluster = cluster().await;
    let client = client(cluster, &prefix("typos")).await;
    for typo in ["acct:{3", "acct:3}", "acct:{{3}}", "acct:{3}}"] {
        match client.rwlock(typo) {
            Err(Error::InvalidName(why)) => assert!(why.contains(typo), "{why}"),
            other => panic!("{typo}: {other:?}"),
        }
    }
    let lock = client.rwlock("acct:{3}").unwrap();
    assert!(lock.same_slot_as("acct:{3}:balance"));
    let spaced = client.rwlock("acct:{ 3}").unwrap();
    assert!(!spaced.same_slot_as("acct:{3}:balance"));
    client.close().await;
}
