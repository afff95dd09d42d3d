//! No Redis needed: the futures of the API stay small and shallow, so that users can nest
//! them in their own async functions and spawn them (the client's futures sit behind
//! boxes, at the routing loop and the script call).

use std::time::Duration;

use cluster_rwlock::{Result, RwLock};

async fn l0(lock: &RwLock) -> Result<u64> {
    let w = lock.write_timeout(Duration::from_secs(1)).await?;
    let up = w.downgrade_to_upgradable().await?;
    let w = match up.upgrade_timeout(Duration::from_secs(1)).await? {
        Ok(w) => w,
        Err(up) => up.upgrade().await?,
    };
    let r = w.read_again().await?;
    r.release().await?;
    Ok(w.fence())
}
async fn l1(lock: &RwLock) -> Result<u64> {
    l0(lock).await
}
async fn l2(lock: &RwLock) -> Result<u64> {
    l1(lock).await
}
async fn l3(lock: &RwLock) -> Result<u64> {
    l2(lock).await
}
async fn l4(lock: &RwLock) -> Result<u64> {
    l3(lock).await
}
async fn l5(lock: &RwLock) -> Result<u64> {
    l4(lock).await
}
async fn l6(lock: &RwLock) -> Result<u64> {
    l5(lock).await
}
async fn l7(lock: &RwLock) -> Result<u64> {
    l6(lock).await
}

/// The size of what `make` would return, without calling it.
fn size_of_output<F: FnOnce(&'static RwLock) -> T, T>(_make: F) -> usize {
    std::mem::size_of::<T>()
}

#[test]
fn acquire_futures_are_small() {
    let sizes = [
        size_of_output(|lock| lock.write()),
        size_of_output(|lock| lock.read_timeout(Duration::ZERO)),
        size_of_output(|lock| lock.try_write()),
        size_of_output(l7),
    ];
    // nested eight layers deep, it can still be spawned (checked when this compiles)
    let _ = size_of_output(|lock| tokio::spawn(l7(lock)));
    println!("future sizes in bytes (write, read_timeout, try_write, 8 layers): {sizes:?}");
    // the client's futures are behind boxes (one allocation per round trip): an acquire
    // future was 15 kB before
    assert!(sizes.iter().all(|&s| s < 4 * 1024), "{sizes:?}");
}
