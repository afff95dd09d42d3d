//! From the URL a user typed to a lock client: any node of a cluster works as a seed.

use cluster_rwlock::{LockClient, LockConfig};

use crate::args::Cli;

/// The configuration for `cli`: `redis-cluster://` is a cluster; `redis://` is a cluster
/// seed when the node says so, else one node.
pub async fn config(cli: &Cli) -> Result<LockConfig, Box<dyn std::error::Error>> {
    // `redis://` of a cluster node means the cluster: the library asks the node
    let base = LockConfig::from_url(cli.url.as_str())?;
    // the lease and the client name matter to `run` only: the holds it takes
    let (lease, name) = match &cli.command {
        crate::args::Command::Run(a) => (
            a.lease.unwrap_or(cluster_rwlock::config::DEFAULT_LEASE),
            a.client_name.as_ref(),
        ),
        _ => (cluster_rwlock::config::DEFAULT_LEASE, None),
    };
    let base = match name {
        Some(name) => base.client_name(name.as_str()),
        None => base,
    };
    let base = tls(base, cli)?;
    let config = base.prefix(cli.prefix.as_str()).lease(lease);
    // `run` tells its command the lease is lost, then kills it after `--grace`: the
    // command must be gone before the server's lease can end
    let config = match &cli.command {
        crate::args::Command::Run(a) if a.on_lost == crate::args::OnLost::Term => {
            let margin = config.get_clock_margin() + a.grace;
            if margin > lease / 2 {
                return Err(format!(
                    "--grace {} is too long for --lease {}: the command is told the lease is lost lease/4 + grace before it ends, which must be at most half the lease; pass --grace {} or less, or --lease {} or more",
                    humantime::format_duration(a.grace),
                    humantime::format_duration(lease),
                    humantime::format_duration(lease.saturating_sub(lease / 2 + config.get_clock_margin())),
                    humantime::format_duration(a.grace.saturating_mul(4)),
                )
                .into());
            }
            config.clock_margin(margin)
        }
        _ => config,
    };
    Ok(config)
}

/// The TLS options of the command line (the library refuses them with a `redis://` URL).
fn tls(config: LockConfig, cli: &Cli) -> Result<LockConfig, Box<dyn std::error::Error>> {
    let read = |path: &std::path::Path| {
        std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let mut config = config;
    if let Some(ca) = &cli.tls_ca {
        config = config.tls_ca_pem(read(ca)?);
    }
    if let (Some(cert), Some(key)) = (&cli.tls_cert, &cli.tls_key) {
        config = config.tls_client_auth(read(cert)?, read(key)?);
    }
    if cli.tls_skip_verification_for_tests_only {
        config = config.tls_skip_verification_for_tests_only();
    }
    Ok(config)
}

/// Why there is no client.
pub enum NoClient {
    /// The arguments or the configuration they make are wrong: what to change.
    Usage(String),
    /// The cluster could not be reached, or refused the connection.
    Unreachable(cluster_rwlock::Error),
}

/// A connected lock client.
pub async fn client(cli: &Cli) -> Result<LockClient, NoClient> {
    let config = config(cli)
        .await
        .map_err(|e| NoClient::Usage(e.to_string()))?;
    LockClient::connect(config).await.map_err(|e| match e {
        cluster_rwlock::Error::InvalidConfig(_) => NoClient::Usage(e.to_string()),
        e => NoClient::Unreachable(e),
    })
}
