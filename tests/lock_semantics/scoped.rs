//! Scoped holds (`with_write`, `with_read`): released after success, an error and a
//! panic; a hold lost while the work ran is told.

use std::time::{Duration, Instant};

use cluster_rwlock::Error;
use fred::prelude::*;

use crate::common::{assert_no_keys, client, client_with, cluster, prefix};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_write_releases_after_success_error_and_panic() {
    let cluster = cluster().await;
    let p = prefix("with");
    let client = client(cluster, &p).await;
    let lock = client.rwlock("res").unwrap();
    let other = client.rwlock("res").unwrap();
    let timeout = Duration::from_secs(5);

    let before = lock.state().await.unwrap().fence.unwrap_or(0);
    let (fence, held) = lock
        .with_write(timeout, |fence, lost| {
            let other = other.clone();
            async move {
                assert!(!lost.is_lost());
                (fence, other.try_read().await.unwrap().is_none())
            }
        })
        .await
        .unwrap()
        .held()
        .unwrap();
    assert!(fence > before && held, "held under fence {fence}");
    assert!(
        other.try_write().await.unwrap().is_some(),
        "released after success"
    );

    let failed: Result<(), &str> = lock
        .with_write(timeout, |_, _| async { Err("the work failed") })
        .await
        .unwrap()
        .held()
        .unwrap();
    assert_eq!(failed, Err("the work failed"));
    assert!(
        other.try_write().await.unwrap().is_some(),
        "released after an error"
    );

    let panicking = lock.clone();
    let task = tokio::spawn(async move {
        panicking
            .with_read(timeout, |_, _| async { panic!("the work panicked") })
            .await
    });
    assert!(task.await.unwrap_err().is_panic());
    // released in the background by the dropped guard, not after a lease (30 s)
    let began = Instant::now();
    let w = other.write_timeout(Duration::from_secs(3)).await.unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(1),
        "{:?}",
        began.elapsed()
    );
    w.release().await.unwrap();

    // a hold lost while the work ran: LockLost, not the work's result
    let quick = client_with(cluster, |c| c.prefix(&p).lease(Duration::from_millis(900))).await;
    let lock = quick.rwlock("res").unwrap();
    let lost = lock
        .with_write(timeout, |_, lost| {
            let (redis, key) = (quick.redis().clone(), lock.key().to_string());
            async move {
                redis.del::<i64, _>(key).await.unwrap();
                tokio::time::timeout(Duration::from_secs(2), lost.lost())
                    .await
                    .expect("told");
                "done"
            }
        })
        .await
        .expect("the work ran");
    // the loss is told, and what the work returned is kept (a commit refused by its
    // fence, say, is the caller's to see)
    assert!(lost.was_lost());
    assert_eq!(lost.value(), &"done");
    assert!(matches!(lost.held(), Err(Error::LockLost)));
    quick.close().await;
    client.close().await;
    assert_no_keys(cluster, &p).await;
}
