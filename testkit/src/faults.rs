//! Faults: kill, pause, restart a node; move a slot; a node's logs.

use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use super::docker::docker_cli;
use super::native::{signal, spawn_native, stop_child};
use super::node::{node_logs, Handle, Node};
use super::{admin, blocking, on_runtime, TestCluster, TestkitError};

impl TestCluster {
    /// Moves `slot`, with its keys, to the master `to` (CLUSTER SETSLOT IMPORTING /
    /// MIGRATING, MIGRATE, SETSLOT NODE), as a resharding would: a
    /// [`start_migration`](Self::start_migration) and its
    /// [`finish_migration`](Self::finish_migration) at once.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.move_slot(42, 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn move_slot(&self, slot: u16, to: usize) -> Result<(), TestkitError> {
        if self.master_for_slot(slot).await?.port == self.node(to)?.info.port {
            return Ok(());
        }
        let migration = self.start_migration(slot, to).await?;
        self.finish_migration(&migration).await
    }

    /// Kills node `index` at once (SIGKILL; the container stays, stopped).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.kill(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn kill(&self, index: usize) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let target = take_target(node, "kill")?;
        match target {
            Target::Container(id) => {
                on_runtime(docker_cli(vec!["kill".into(), id])).await?;
            }
            Target::Process(Some(mut child), _) => {
                // stopping waits for the process: on a blocking thread, then it is put back
                let child = blocking(move || {
                    stop_child(&mut child);
                    child
                })
                .await?;
                put_back(node, child);
            }
            Target::Process(None, _) => {}
        }
        self.mark(index, true);
        Ok(())
    }

    /// Freezes node `index` (`docker pause`, or SIGSTOP): its connections stay open but it
    /// answers nothing until [`unpause`](Self::unpause).
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.pause(0).await?;
    /// cluster.unpause(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn pause(&self, index: usize) -> Result<(), TestkitError> {
        self.freeze(index, true).await?;
        self.mark(index, true);
        Ok(())
    }

    /// Resumes a paused node.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.unpause(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unpause(&self, index: usize) -> Result<(), TestkitError> {
        self.freeze(index, false).await?;
        self.mark(index, false);
        Ok(())
    }

    async fn freeze(&self, index: usize, pause: bool) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let target = {
            let handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
            match &*handle {
                Handle::Container { id, .. } => Frozen::Container(id.clone()),
                Handle::Process { child: Some(c), .. } => Frozen::Process(c.id()),
                Handle::Process { child: None, .. } => {
                    return Err(TestkitError::Command(format!(
                        "node {index} is not running"
                    )))
                }
                Handle::External => return Err(TestkitError::Unsupported("pause")),
            }
        };
        match target {
            Frozen::Container(id) => {
                on_runtime(docker_cli(vec![
                    if pause { "pause" } else { "unpause" }.into(),
                    id,
                ]))
                .await?;
                Ok(())
            }
            Frozen::Process(pid) => {
                let sig = if pause { "STOP" } else { "CONT" };
                // `kill -STOP` is a process of its own: waited for on a blocking thread
                blocking(move || signal(pid, sig)).await?
            }
        }
    }

    /// Starts node `index` again (after [`kill`](Self::kill)), or restarts it when it runs.
    /// It keeps its cluster config and rejoins; if a replica was promoted meanwhile it
    /// comes back as that one's replica.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// cluster.restart(0).await?;
    /// # Ok(()) }
    /// ```
    pub async fn restart(&self, index: usize) -> Result<(), TestkitError> {
        let node = self.node(index)?;
        let port = node.info.port;
        let target = take_target(node, "restart")?;
        match target {
            Target::Container(id) => {
                on_runtime(docker_cli(vec![
                    "restart".into(),
                    "-t".into(),
                    "1".into(),
                    id,
                ]))
                .await?;
            }
            Target::Process(old, dir) => {
                // stopping waits for the old process: on a blocking thread
                let (server, clock, conf) = (self.server, node.clock.clone(), self.conf.clone());
                let (old, new) = blocking(move || {
                    let mut old = old;
                    if let Some(c) = old.as_mut() {
                        stop_child(c);
                    }
                    (
                        old,
                        spawn_native(server, port, &dir, clock.as_deref(), conf.as_ref()),
                    )
                })
                .await?;
                match new {
                    Ok(child) => put_back(node, child),
                    Err(e) => {
                        if let Some(old) = old {
                            put_back(node, old);
                        }
                        return Err(e);
                    }
                }
            }
        }
        // a node loads its append-only file before it answers: on a machine running
        // several clusters at once (a suite's tests in parallel, over TLS) that has taken
        // over 10 s
        let limit = Duration::from_secs(30);
        let deadline = Instant::now() + limit;
        while admin::text(port, "PING", &[]).await.is_err() {
            if Instant::now() > deadline {
                return Err(self
                    .not_ready(limit, format!("node {port} did not come back"))
                    .await);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.mark(index, false);
        Ok(())
    }

    /// The last lines that node `index` logged.
    ///
    /// ```no_run
    /// # async fn demo(cluster: &cluster_rwlock_testkit::TestCluster) -> Result<(), cluster_rwlock_testkit::TestkitError> {
    /// println!("{}", cluster.logs(0).await?);
    /// # Ok(()) }
    /// ```
    pub async fn logs(&self, index: usize) -> Result<String, TestkitError> {
        Ok(node_logs(self.node(index)?).await)
    }
}

/// What a fault acts on: a container, or a node process (taken out of its handle while it
/// is stopped on a blocking thread) with its directory.
enum Target {
    Container(String),
    Process(Option<Child>, PathBuf),
}

/// The target of fault `what` on `node`; a node process is taken out of its handle (the
/// fault puts it back, or a new one, when it is done).
fn take_target(node: &Node, what: &'static str) -> Result<Target, TestkitError> {
    let mut handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
    match &mut *handle {
        Handle::Container { id, .. } => Ok(Target::Container(id.clone())),
        Handle::Process { child, dir } => Ok(Target::Process(child.take(), dir.clone())),
        Handle::External => Err(TestkitError::Unsupported(what)),
    }
}

/// What a pause acts on: a container, or the pid of a node process.
enum Frozen {
    Container(String),
    Process(u32),
}

/// Puts a node process back into its node's handle, unless another took its place meanwhile.
fn put_back(node: &Node, process: Child) {
    let mut handle = node.handle.lock().unwrap_or_else(|e| e.into_inner());
    if let Handle::Process {
        child: slot @ None, ..
    } = &mut *handle
    {
        *slot = Some(process);
    }
}
