//! A lane keeps the order of its calls, whichever way each was sent (by its caller, the
//! lane idle, or by the lane's task behind a batch on the wire).

use futures_util::stream::{FuturesUnordered, StreamExt};

use fred::prelude::*;

use super::TwoPaths;

/// Calls made one after another on one lane reach the server in the order they were
/// made: fenced writes with growing fences, eight in flight at any time, each made as
/// another is answered, are all written (a call that overtook one made before it would
/// leave that one refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_on_one_lane_run_in_the_order_they_were_made() {
    let t = TwoPaths::new("order").await;
    let key = format!("{}:value", t.fast_key);
    {
        let (t, key) = (&t, key.as_str());
        let write =
            |fence: u64| async move { (fence, t.fast.fenced_set(t.on(key), fence, b"v").await) };
        let mut in_flight: FuturesUnordered<_> = (1..=8).map(write).collect();
        let (mut next, mut written) = (9u64, 0);
        while let Some((fence, w)) = in_flight.next().await {
            let (ok, last) = w.unwrap();
            assert!(ok, "write {fence} was overtaken (last {last})");
            written += 1;
            if next <= 400 {
                in_flight.push(write(next));
                next += 1;
            }
        }
        assert_eq!(written, 400);
    }
    let _: i64 = t.node.del(key).await.unwrap();
    t.remove().await;
}
