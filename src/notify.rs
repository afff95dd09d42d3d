//! Release notifications: one (sharded) pub/sub subscription per lock name per client,
//! shared by the local waiters and dropped when the last one leaves, after a short
//! linger, so that a lock taken in a loop does not subscribe and unsubscribe each time.
//!
//! A waiter joins BEFORE its attempt, so a release that follows the failed attempt is
//! never missed while the subscription is live. Subscriptions are renewed after
//! reconnects and cluster changes (Redis drops shard subscriptions of a slot that moves,
//! and the client does not report it); each renewal wakes every local waiter, since a
//! release may have gone unheard meanwhile. The waiter's deadline timer stays the
//! backstop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::broadcast;

/// Who a release message lets proceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wake {
    /// Anyone (the lock is free and no writer is queued; or a message may have been lost).
    Anyone,
    /// Readers.
    Readers,
    /// The lock was handed to the queued writer with this owner token, as the hold with
    /// this id and fence.
    Granted { owner: String, id: u64, fence: u64 },
}

impl Wake {
    fn parse(payload: &str) -> Wake {
        match payload {
            "r" => Wake::Readers,
            p if p.starts_with("g ") => {
                let mut parts = p[2..].split(' ');
                let granted = (|| {
                    let owner = parts.next()?.to_string();
                    let id = parts.next()?.parse().ok()?;
                    let fence = parts.next()?.parse().ok()?;
                    Some(Wake::Granted { owner, id, fence })
                })();
                // unreadable: let everyone look for themselves
                granted.unwrap_or(Wake::Anyone)
            }
            _ => Wake::Anyone,
        }
    }

    /// Whether a waiter of this mode and owner should attempt again (or, for a hand-off,
    /// has been granted the lock).
    pub fn concerns(&self, write: bool, owner: &str) -> bool {
        match self {
            Wake::Anyone => true,
            Wake::Readers => !write,
            Wake::Granted { owner: o, .. } => write && o == owner,
        }
    }
}

/// How long a subscription outlives its last waiter.
const LINGER: Duration = Duration::from_secs(2);

struct Entry {
    tx: broadcast::Sender<Wake>,
    waiters: usize,
    /// When the last waiter left (the subscription lingers until LINGER after that).
    idle_since: Option<Instant>,
    subscribed: Arc<tokio::sync::OnceCell<bool>>,
}

pub(crate) struct Notifier {
    subscriber: SubscriberClient,
    sharded: bool,
    channels: Mutex<HashMap<String, Entry>>,
    /// Serializes subscribe and unsubscribe calls, so that they reach the server in order.
    ops: tokio::sync::Mutex<()>,
}

/// A waiter's membership of a channel; leaving drops the subscription with the last one.
pub(crate) struct Subscription {
    notifier: Arc<Notifier>,
    channel: String,
    rx: broadcast::Receiver<Wake>,
    live: bool,
}

impl Subscription {
    /// Whether the server confirmed the subscription (otherwise only timers wake).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// The next release message (a lost message counts as `Anyone`).
    pub async fn next(&mut self) -> Wake {
        match self.rx.recv().await {
            Ok(w) => w,
            Err(broadcast::error::RecvError::Lagged(_)) => Wake::Anyone,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self
            .notifier
            .channels
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get_mut(&self.channel) {
            e.waiters -= 1;
            if e.waiters == 0 {
                e.idle_since = Some(Instant::now());
            }
        }
    }
}

impl Notifier {
    /// Starts the dispatcher and the task that renews subscriptions.
    pub fn start(subscriber: SubscriberClient, commands: &Client, sharded: bool) -> Arc<Notifier> {
        let notifier = Arc::new(Notifier {
            subscriber,
            sharded,
            channels: Mutex::new(HashMap::new()),
            ops: tokio::sync::Mutex::new(()),
        });
        let weak = Arc::downgrade(&notifier);
        let mut messages = notifier.subscriber.message_rx();
        tokio::spawn(async move {
            loop {
                let wake = match messages.recv().await {
                    Ok(msg) => {
                        let payload: String = msg.value.convert().unwrap_or_default();
                        Some((msg.channel.to_string(), Wake::parse(&payload)))
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => None,
                    Err(broadcast::error::RecvError::Closed) => return,
                };
                let Some(n) = weak.upgrade() else { return };
                match wake {
                    Some((channel, w)) => n.dispatch(&channel, w),
                    None => n.wake_all(),
                }
            }
        });
        let weak = Arc::downgrade(&notifier);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(LINGER / 2);
            loop {
                tick.tick().await;
                let Some(n) = weak.upgrade() else { return };
                n.sweep().await;
            }
        });
        let weak = Arc::downgrade(&notifier);
        let mut reconnects = notifier.subscriber.reconnect_rx();
        let mut sub_changes = notifier.subscriber.cluster_change_rx();
        let mut changes = commands.cluster_change_rx();
        tokio::spawn(async move {
            loop {
                let sync = tokio::select! {
                    r = reconnects.recv() => match r { Err(broadcast::error::RecvError::Closed) => return, _ => false },
                    r = sub_changes.recv() => match r { Err(broadcast::error::RecvError::Closed) => return, _ => false },
                    r = changes.recv() => match r { Err(broadcast::error::RecvError::Closed) => return, _ => true },
                };
                let Some(n) = weak.upgrade() else { return };
                n.renew_subscriptions(sync).await;
            }
        });
        notifier
    }

    /// Unsubscribes from channels whose last waiter left more than LINGER ago.
    async fn sweep(&self) {
        let stale: Vec<String> = {
            let mut map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            let stale: Vec<String> = map
                .iter()
                .filter(|(_, e)| e.idle_since.is_some_and(|t| t.elapsed() >= LINGER))
                .map(|(c, _)| c.clone())
                .collect();
            for c in &stale {
                map.remove(c);
            }
            stale
        };
        if stale.is_empty() {
            return;
        }
        let _op = self.ops.lock().await;
        // a channel joined again meanwhile has subscribed anew (after us, under `ops`)
        let still_gone: Vec<String> = {
            let map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            stale.into_iter().filter(|c| !map.contains_key(c)).collect()
        };
        for c in still_gone {
            let _ = if self.sharded {
                self.subscriber.sunsubscribe(c).await
            } else {
                self.subscriber.unsubscribe(c).await
            };
        }
    }

    fn dispatch(&self, channel: &str, wake: Wake) {
        let map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = map.get(channel) {
            let _ = e.tx.send(wake);
        }
    }

    fn wake_all(&self) {
        let map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
        for e in map.values() {
            let _ = e.tx.send(Wake::Anyone);
        }
    }

    /// Subscribes again to every channel this client follows, then wakes all waiters
    /// (a release may have gone unheard meanwhile).
    pub async fn renew_subscriptions(&self, sync: bool) {
        {
            let _op = self.ops.lock().await;
            if sync {
                let _ = self.subscriber.sync_cluster().await;
            }
            let channels: Vec<String> = self
                .channels
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .keys()
                .cloned()
                .collect();
            for channel in channels {
                let _ = if self.sharded {
                    self.subscriber.ssubscribe(channel).await
                } else {
                    self.subscriber.subscribe(channel).await
                };
            }
        }
        self.wake_all();
    }

    /// Joins `channel`, subscribing first when this is its first waiter.
    pub async fn join(self: &Arc<Self>, channel: &str) -> Subscription {
        let (rx, subscribed) = {
            let mut map = self.channels.lock().unwrap_or_else(|e| e.into_inner());
            let entry = map.entry(channel.to_string()).or_insert_with(|| Entry {
                tx: broadcast::channel(16).0,
                waiters: 0,
                idle_since: None,
                subscribed: Arc::new(tokio::sync::OnceCell::new()),
            });
            entry.waiters += 1;
            entry.idle_since = None;
            (entry.tx.subscribe(), entry.subscribed.clone())
        };
        let live = *subscribed
            .get_or_init(|| async {
                let _op = self.ops.lock().await;
                let done = if self.sharded {
                    self.subscriber.ssubscribe(channel.to_string()).await
                } else {
                    self.subscriber.subscribe(channel.to_string()).await
                };
                done.is_ok()
            })
            .await;
        Subscription {
            notifier: self.clone(),
            channel: channel.to_string(),
            rx,
            live,
        }
    }

    /// Number of channels this client is subscribed to.
    pub fn channel_count(&self) -> usize {
        self.channels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    pub async fn quit(&self) {
        let _ = self.subscriber.quit().await;
    }
}
