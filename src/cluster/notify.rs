//! Release notifications: one (sharded) pub/sub subscription per lock name per client,
//! made on the node that serves the name's slot, shared by the local waiters and dropped
//! when the last one leaves, after a short linger, so that a lock taken in a loop does not
//! subscribe and unsubscribe each time.
//!
//! A waiter joins BEFORE its attempt, so a release that follows the failed attempt is
//! never missed while the subscription is live. Each node has its own subscriber
//! connection: a node that hangs delays only the subscriptions of its own slots. When the
//! slot map moves a channel's slot to another node (a failover, a slot move), the channel
//! is subscribed on the new node before any command of this client is routed there, and
//! its waiters are woken, since a release may have gone unheard meanwhile. The same is
//! done when a subscriber connection is made again. A subscription that is not live yet
//! leaves its waiters on timed retries; when it becomes live late, they are woken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use fred::clients::SubscriberClient;
use fred::prelude::*;
use tokio::sync::{broadcast, watch};

use crate::cluster::router::{Router, Routes};
use crate::cluster::topology::Addr;
use crate::message::{Heard, ReleaseMessage};
use crate::mutex::lock;

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
    /// An operator broke the client of this name (its holds and places went): its
    /// waiters stop; the others look again.
    Broken { client: String },
}

impl Wake {
    /// Who `heard` lets proceed: a gap lets everyone look for themselves.
    fn of(heard: Heard) -> Wake {
        match heard {
            Heard::Message(ReleaseMessage::Readers) => Wake::Readers,
            Heard::Message(ReleaseMessage::HandedOver { owner, hold, fence }) => Wake::Granted {
                owner,
                id: hold,
                fence,
            },
            Heard::Message(ReleaseMessage::Broken {
                client: Some(client),
                ..
            }) => Wake::Broken { client },
            // free, broken, unreadable, or a gap: let everyone look for themselves
            _ => Wake::Anyone,
        }
    }

    /// The client name an operator broke, when it is `owner`'s (an owner token a client
    /// of that name made): a waiter under `owner` lost its place and stops.
    pub fn broke(&self, owner: &str) -> Option<&str> {
        match self {
            Wake::Broken { client } => {
                (crate::keys::client_name_of(owner) == Some(client.as_str())).then_some(client)
            }
            _ => None,
        }
    }

    #[cfg(test)]
    fn parse(payload: &str) -> Wake {
        Wake::of(Heard::Message(ReleaseMessage::parse(payload)))
    }

    /// Whether a waiter of this mode and owner should attempt again (or, for a hand-off,
    /// has been granted the lock).
    pub fn concerns(&self, write: bool, owner: &str) -> bool {
        match self {
            Wake::Anyone | Wake::Broken { .. } => true,
            Wake::Readers => !write,
            Wake::Granted { owner: o, .. } => write && o == owner,
        }
    }
}

/// How long a subscription outlives its last waiter.
const LINGER: Duration = Duration::from_secs(2);
/// How long a waiter waits for its channel's subscription before its first attempt.
const JOIN_WAIT: Duration = Duration::from_secs(1);

struct Entry {
    tx: broadcast::Sender<Heard>,
    slot: u16,
    waiters: usize,
    /// When the last waiter left (the subscription lingers until LINGER after that).
    idle_since: Option<Instant>,
    /// The node it is subscribed on (None: not yet, or the attempt failed).
    node: Option<Addr>,
    /// A subscribe is under way.
    placing: bool,
    live: watch::Sender<bool>,
}

/// One node's subscriber connection; `ops` keeps its subscribes and unsubscribes in order.
struct NodeSubscriber {
    client: SubscriberClient,
    ops: tokio::sync::Mutex<()>,
}

pub(crate) struct Notifier {
    router: Arc<Router>,
    sharded: bool,
    timeout: Duration,
    channels: Mutex<HashMap<String, Entry>>,
    subscribers: Mutex<HashMap<Addr, Arc<NodeSubscriber>>>,
}

/// A waiter's membership of a channel; leaving drops the subscription with the last one.
pub(crate) struct Subscription {
    notifier: Arc<Notifier>,
    channel: String,
    rx: broadcast::Receiver<Heard>,
    live: watch::Receiver<bool>,
}

impl Subscription {
    /// Whether the server confirmed the subscription (otherwise only timers wake).
    pub fn is_live(&self) -> bool {
        *self.live.borrow()
    }

    /// Who the next release message lets proceed (a lost message lets anyone).
    pub async fn next(&mut self) -> Wake {
        Wake::of(self.hear().await)
    }

    /// The next release message, or a gap where messages may have been lost.
    pub async fn hear(&mut self) -> Heard {
        match self.rx.recv().await {
            Ok(heard) => heard,
            Err(broadcast::error::RecvError::Lagged(_)) => Heard::Gap,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = lock(&self.notifier.channels);
        if let Some(e) = map.get_mut(&self.channel) {
            e.waiters = e.waiters.saturating_sub(1);
            if e.waiters == 0 {
                e.idle_since = Some(Instant::now());
            }
        }
    }
}

impl Notifier {
    /// Starts the task that drops lingering subscriptions.
    pub fn start(router: Arc<Router>, sharded: bool, timeout: Duration) -> Arc<Notifier> {
        let notifier = Arc::new(Notifier {
            router,
            sharded,
            timeout,
            channels: Mutex::new(HashMap::new()),
            subscribers: Mutex::new(HashMap::new()),
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
        notifier
    }

    /// The subscriber connection of `addr`, made on first use, with its message and
    /// reconnection tasks.
    fn subscriber(self: &Arc<Self>, addr: &str) -> Option<Arc<NodeSubscriber>> {
        let mut subs = lock(&self.subscribers);
        if let Some(s) = subs.get(addr) {
            return Some(s.clone());
        }
        let client = self.router.connector().subscriber(addr).ok()?;
        let sub = Arc::new(NodeSubscriber {
            client,
            ops: tokio::sync::Mutex::new(()),
        });
        subs.insert(addr.to_string(), sub.clone());
        let weak = Arc::downgrade(self);
        let mut messages = sub.client.message_rx();
        tokio::spawn(async move {
            loop {
                let wake = match messages.recv().await {
                    Ok(msg) => {
                        let payload: String = msg.value.convert().unwrap_or_default();
                        let said = ReleaseMessage::parse(&payload);
                        Some((msg.channel.to_string(), Heard::Message(said)))
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
        let weak: Weak<Notifier> = Arc::downgrade(self);
        let mut reconnects = sub.client.reconnect_rx();
        let addr = addr.to_string();
        tokio::spawn(async move {
            loop {
                match reconnects.recv().await {
                    Err(broadcast::error::RecvError::Closed) => return,
                    _ => {
                        let Some(n) = weak.upgrade() else { return };
                        n.resubscribe_node(&addr).await;
                    }
                }
            }
        });
        Some(sub)
    }

    /// Opens the subscriber connections of the masters of `routes` ahead of need, so that
    /// a first waiter does not wait for a connection.
    pub fn warm(self: &Arc<Self>, routes: &Routes) {
        for node in routes.nodes() {
            let _ = self.subscriber(&node.addr);
        }
    }

    /// Subscribes `channel` on `addr`; true when the server confirmed it in time.
    async fn subscribe_on(self: &Arc<Self>, addr: &str, channel: &str) -> bool {
        let Some(sub) = self.subscriber(addr) else {
            return false;
        };
        let work = async {
            let _op = sub.ops.lock().await;
            if self.sharded {
                sub.client.ssubscribe(channel.to_string()).await
            } else {
                sub.client.subscribe(channel.to_string()).await
            }
        };
        matches!(tokio::time::timeout(self.timeout, work).await, Ok(Ok(())))
    }

    /// Unsubscribes `channel` on `addr` in the background (the node may not answer).
    fn unsubscribe_on(self: &Arc<Self>, addr: &str, channel: String) {
        let Some(sub) = lock(&self.subscribers).get(addr).cloned() else {
            return;
        };
        let (sharded, timeout) = (self.sharded, self.timeout);
        tokio::spawn(async move {
            let work = async {
                let _op = sub.ops.lock().await;
                if sharded {
                    sub.client.sunsubscribe(channel).await
                } else {
                    sub.client.unsubscribe(channel).await
                }
            };
            let _ = tokio::time::timeout(timeout, work).await;
        });
    }

    /// Subscribes `channel` on `addr` and records it; wakes its waiters when `wake` (a
    /// release may have gone unheard).
    async fn place(self: &Arc<Self>, channel: &str, addr: &str, wake: bool) {
        let ok = self.subscribe_on(addr, channel).await;
        let old = {
            let mut map = lock(&self.channels);
            let Some(e) = map.get_mut(channel) else {
                // gone meanwhile: the sweep's unsubscribe may have run before ours
                drop(map);
                self.unsubscribe_on(addr, channel.to_string());
                return;
            };
            e.placing = false;
            let old = std::mem::replace(&mut e.node, ok.then(|| addr.to_string()));
            e.live.send_replace(ok);
            if wake {
                let _ = e.tx.send(Heard::Gap);
            }
            old
        };
        if let Some(old) = old.filter(|o| o != addr) {
            self.unsubscribe_on(&old, channel.to_string());
        }
    }

    /// For a slot map about to be put in force: subscribes on their new node the
    /// channels whose slot moves there (or that are not subscribed yet), then wakes their
    /// waiters. Returns the tasks, so that the caller may wait for them: subscribing
    /// before any command is routed to the new node means a release sent there is heard.
    pub fn follow(self: &Arc<Self>, routes: &Routes) -> Vec<tokio::task::JoinHandle<()>> {
        let mut map = lock(&self.channels);
        let mut tasks = Vec::new();
        for (channel, e) in map.iter_mut() {
            let Some(node) = routes.node(e.slot) else {
                continue;
            };
            if e.placing || e.node.as_deref() == Some(node.addr.as_str()) {
                continue;
            }
            e.placing = true;
            let (me, channel, addr) = (self.clone(), channel.clone(), node.addr.clone());
            tasks.push(tokio::spawn(async move {
                me.place(&channel, &addr, true).await
            }));
        }
        tasks
    }

    /// After a subscriber connection was made again: subscribes its channels again.
    async fn resubscribe_node(self: &Arc<Self>, addr: &str) {
        let channels: Vec<(String, u16)> = lock(&self.channels)
            .iter()
            .filter(|(_, e)| e.node.as_deref() == Some(addr))
            .map(|(c, e)| (c.clone(), e.slot))
            .collect();
        if !channels.is_empty() {
            crate::observe::resubscribing(addr, channels.len());
        }
        for (c, slot) in channels {
            // where the slot is served now (the node may have been demoted meanwhile)
            if let Some(node) = self.router.node_for(slot) {
                self.place(&c, &node.addr, true).await;
            }
        }
    }

    /// Unsubscribes from channels whose last waiter left more than LINGER ago.
    async fn sweep(self: &Arc<Self>) {
        let stale: Vec<(String, Option<Addr>)> = {
            let mut map = lock(&self.channels);
            let stale: Vec<String> = map
                .iter()
                .filter(|(_, e)| e.idle_since.is_some_and(|t| t.elapsed() >= LINGER))
                .map(|(c, _)| c.clone())
                .collect();
            stale
                .into_iter()
                .filter_map(|c| map.remove(&c).map(|e| (c, e.node)))
                .collect()
        };
        for (channel, node) in stale {
            if let Some(addr) = node {
                self.unsubscribe_on(&addr, channel);
            }
        }
    }

    fn dispatch(&self, channel: &str, heard: Heard) {
        if let Some(e) = lock(&self.channels).get(channel) {
            let _ = e.tx.send(heard);
        }
    }

    fn wake_all(&self) {
        for e in lock(&self.channels).values() {
            let _ = e.tx.send(Heard::Gap);
        }
    }

    /// Joins `channel` (of `slot`), subscribing first when this is its first waiter;
    /// waits at most [`JOIN_WAIT`] for the subscription to be live.
    pub async fn join(self: &Arc<Self>, channel: &str, slot: u16) -> Subscription {
        let (rx, mut live, first) = {
            let mut map = lock(&self.channels);
            let mut first = false;
            let entry = map.entry(channel.to_string()).or_insert_with(|| {
                first = true;
                Entry {
                    tx: broadcast::channel(16).0,
                    slot,
                    waiters: 0,
                    idle_since: None,
                    node: None,
                    placing: true,
                    live: watch::channel(false).0,
                }
            });
            entry.waiters += 1;
            entry.idle_since = None;
            (entry.tx.subscribe(), entry.live.subscribe(), first)
        };
        if first {
            let me = self.clone();
            let channel = channel.to_string();
            let started = Instant::now();
            // its own task: a node that does not answer must not hold up the waiter
            // beyond JOIN_WAIT; waiters that went ahead on timers are woken when it lands
            tokio::spawn(async move {
                match me.router.node_for(slot) {
                    Some(node) => me.place(&channel, &node.addr, false).await,
                    None => {
                        if let Some(e) = lock(&me.channels).get_mut(&channel) {
                            e.placing = false;
                        }
                    }
                }
                if started.elapsed() >= JOIN_WAIT {
                    me.dispatch(&channel, Heard::Gap);
                }
            });
        }
        // made before the wait: a waiter dropped while it waits leaves through its Drop,
        // or the channel would count it forever and never be unsubscribed
        let subscription = Subscription {
            notifier: self.clone(),
            channel: channel.to_string(),
            rx,
            live: live.clone(),
        };
        let _ = tokio::time::timeout(JOIN_WAIT, live.wait_for(|l| *l)).await;
        subscription
    }

    /// Number of channels this client is subscribed to.
    pub fn channel_count(&self) -> usize {
        lock(&self.channels).len()
    }

    /// Closes the subscriber connections (without waiting for nodes that do not answer).
    pub fn close(&self) {
        for sub in lock(&self.subscribers).values() {
            let c = sub.client.clone();
            let timeout = self.timeout;
            tokio::spawn(async move {
                let _ = tokio::time::timeout(timeout, c.quit()).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_messages_are_parsed_in_one_place() {
        assert!(matches!(Wake::parse("r"), Wake::Readers));
        assert!(matches!(Wake::parse("*"), Wake::Anyone));
        let random = "c734d57db2c34e179d1065b595a90956";
        let broke = Wake::parse("x 1 9 w7@b");
        assert!(broke.concerns(true, "job-17") && broke.concerns(false, "job-17"));
        assert_eq!(broke.broke(&format!("w7@b/{random}:3")), Some("w7@b"));
        assert_eq!(broke.broke(&format!("w8@b/{random}:3")), None);
        assert_eq!(broke.broke("w7@b"), None);
        assert_eq!(
            Wake::parse("x 1 9").broke(&format!("w7@b/{random}:3")),
            None
        );
        match Wake::parse("g job-17 5 123") {
            Wake::Granted { owner, id, fence } => {
                assert_eq!((owner.as_str(), id, fence), ("job-17", 5, 123))
            }
            _ => panic!("a hand-off"),
        }
        // unreadable: everyone looks for themselves
        assert!(matches!(Wake::parse("g job-17 x 1"), Wake::Anyone));
        assert!(matches!(Wake::parse("g"), Wake::Anyone));
        assert!(matches!(Wake::parse(""), Wake::Anyone));
    }

    #[test]
    fn a_hand_off_concerns_only_its_writer() {
        let g = Wake::parse("g a 1 2");
        assert!(g.concerns(true, "a"));
        assert!(!g.concerns(true, "b"));
        assert!(!g.concerns(false, "a"));
        assert!(Wake::Readers.concerns(false, "x"));
        assert!(!Wake::Readers.concerns(true, "x"));
        assert!(Wake::Anyone.concerns(true, "x"));
    }
}
