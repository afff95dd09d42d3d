//! The connections to one node: a few command connections and, when needed, one
//! subscriber. Each is a fred client of its own (centralized), so a node that hangs
//! stalls only the commands sent to it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fred::clients::SubscriberClient;
use fred::prelude::*;
use fred::types::config::UnresponsiveConfig;

use crate::cluster::lane::{Lane, Tally};
use crate::cluster::topology::Addr;
use crate::error::{ClientResult, Error, Result};

/// Reconnect at once, then back off to one attempt every 2 s. fred waits the policy's
/// delay before the FIRST connection too, and its default jitter adds up to 100 ms: a
/// connection to a newly promoted master would wait for nothing.
pub(crate) fn reconnect_policy() -> ReconnectPolicy {
    let mut policy = ReconnectPolicy::new_exponential(0, 1, 2_000, 2);
    policy.set_jitter(1);
    policy
}

/// Builds the clients of any node from one template (credentials, TLS, timeouts).
#[derive(Clone)]
pub(crate) struct Connector {
    template: Config,
    timeout: Duration,
    connections: usize,
    /// `WAIT`s sent by the lanes of every node (see `LockClient::stats`).
    waits: Arc<AtomicU64>,
}

impl Connector {
    pub fn new(template: Config, timeout: Duration, connections: usize) -> Connector {
        Connector {
            template,
            timeout,
            connections: connections.max(1),
            waits: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `WAIT`s sent so far by the lanes of the nodes this connector made.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// The config every connection is made from (TLS included), built once at connect.
    pub fn template(&self) -> &Config {
        &self.template
    }

    fn builder(&self, addr: &str, fail_fast: bool) -> Result<Builder> {
        let (host, port) = addr
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
            .ok_or_else(|| Error::Protocol(format!("node address {addr:?}")))?;
        let mut config = self.template.clone();
        config.server = ServerConfig::new_centralized(host, port);
        config.fail_fast = fail_fast;
        let timeout = self.timeout;
        let mut builder = Builder::from_config(config);
        builder
            .with_connection_config(|c| {
                c.connection_timeout = timeout;
                c.internal_command_timeout = timeout;
                // fred never sends a command again by itself: the router does (see
                // `Router::call`), and only it knows that a command sent again may find
                // what its first sending did (a release that ran, whose reply was lost)
                c.max_command_attempts = 1;
                // lock traffic is small request/reply: never wait for Nagle
                c.tcp.nodelay = Some(true);
                // a frozen node keeps its connections open but answers nothing: drop the
                // connection, so that it is made afresh once the node answers again
                c.unresponsive = UnresponsiveConfig {
                    max_timeout: Some(timeout),
                    interval: (timeout / 4).max(Duration::from_millis(10)),
                };
            })
            .with_performance_config(|p| p.default_command_timeout = timeout)
            .set_policy(reconnect_policy());
        Ok(builder)
    }

    /// Connects to a seed and waits for the connection, so that a wrong address or
    /// password is reported at once.
    pub async fn probe(&self, addr: &str) -> Result<Client> {
        let client = self.builder(addr, true)?.build().lock_err()?;
        match tokio::time::timeout(self.timeout + Duration::from_secs(1), client.init()).await {
            Ok(Ok(_)) => Ok(client),
            Ok(Err(e)) => {
                let c = client.clone();
                tokio::spawn(async move { c.quit().await });
                Err(Error::Connect {
                    addr: addr.to_string(),
                    source: Box::new(Error::from_client(e)),
                })
            }
            Err(_) => {
                let c = client.clone();
                tokio::spawn(async move { c.quit().await });
                Err(Error::Unavailable(format!(
                    "could not connect to {addr} in time"
                )))
            }
        }
    }

    /// The command connections of a node, connecting in the background (commands sent
    /// meanwhile wait for the connection, within their timeout).
    pub fn node(&self, addr: &str) -> Result<Node> {
        let builder = self.builder(addr, false)?;
        let mut clients = Vec::with_capacity(self.connections);
        for _ in 0..self.connections {
            let client = builder.build().lock_err()?;
            let _task = client.connect();
            clients.push(client);
        }
        let tally = Tally::new(self.waits.clone());
        Ok(Node {
            addr: addr.to_string(),
            lanes: clients
                .iter()
                .map(|c| Lane::new(c.clone(), tally.clone()))
                .collect(),
            clients,
            control: std::sync::OnceLock::new(),
            builder,
            tally,
        })
    }

    /// A subscriber connection to a node, connecting in the background.
    pub fn subscriber(&self, addr: &str) -> Result<SubscriberClient> {
        let subscriber = self
            .builder(addr, false)?
            .build_subscriber_client()
            .lock_err()?;
        let _task = subscriber.connect();
        Ok(subscriber)
    }
}

/// The command connections of one node.
pub(crate) struct Node {
    pub addr: Addr,
    clients: Vec<Client>,
    /// Parallel to `clients`: the lane of each connection.
    lanes: Vec<Lane>,
    /// The connection that reads the topology (`CLUSTER NODES`), made on first use: no
    /// `WAIT` ever blocks it, so a view is never read behind a batch's confirmation.
    control: std::sync::OnceLock<Client>,
    builder: Builder,
    /// What the lanes counted; the replicas the node last reported attached.
    tally: Tally,
}

impl Node {
    /// The replicas this node last reported attached to it (read by a lane's batch that
    /// needed it), if it has.
    pub fn attached_replicas(&self) -> Option<u32> {
        self.tally.attached()
    }

    /// This node's last confirmation, if it fell short no earlier than `since` and none
    /// was confirmed after it: replicas wanted and acknowledged, and those that did not.
    pub fn short_since(
        &self,
        since: std::time::Instant,
    ) -> Option<crate::cluster::lane::Unconfirmed> {
        self.tally.short_since(since)
    }

    /// The connection for the topology's reads (see the field).
    pub fn control(&self) -> Result<&Client> {
        if let Some(c) = self.control.get() {
            return Ok(c);
        }
        let client = self.builder.build().lock_err()?;
        let _task = client.connect();
        // a racing caller's connection is dropped unused, and closed
        if let Err(extra) = self.control.set(client) {
            tokio::spawn(async move { extra.quit().await });
        }
        self.control
            .get()
            .ok_or_else(|| Error::Protocol("the control connection".into()))
    }

    /// The connection that carries the commands of `slot`: always the same one, so that a
    /// lock's commands stay in order and `WAIT` counts its writes.
    pub fn client(&self, slot: u16) -> &Client {
        &self.clients[usize::from(slot) % self.clients.len()]
    }

    /// The lane of [`client`](Self::client)`(slot)`: every function call of `slot` takes it.
    pub fn lane(&self, slot: u16) -> &Lane {
        &self.lanes[usize::from(slot) % self.lanes.len()]
    }

    /// Waits (at most `within`) until every connection is up.
    pub async fn connected(&self, within: Duration) {
        let all = futures_util::future::join_all(self.clients.iter().map(|c| c.wait_for_connect()));
        let _ = tokio::time::timeout(within, all).await;
    }

    /// Closes the connections, without waiting for a node that does not answer.
    pub fn close(&self, within: Duration) {
        for c in self.clients.iter().chain(self.control.get()) {
            let c = c.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(within, c.quit()).await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane's `WAIT` proves its batch only because no command is ever written twice
    /// (see `cluster::lane`): a connection made from any template keeps that setting.
    #[test]
    fn commands_are_written_at_most_once() {
        let template = Config {
            fail_fast: true,
            ..Default::default()
        };
        let connector = Connector::new(template, Duration::from_secs(1), 2);
        for fail_fast in [true, false] {
            let builder = connector.builder("127.0.0.1:7000", fail_fast).unwrap();
            assert_eq!(builder.get_connection_config().max_command_attempts, 1);
        }
        assert!(connector.builder("no port", false).is_err());
    }
}
