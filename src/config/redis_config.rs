//! What the Redis client is given: URLs checked and parsed (a malformed one refused
//! where it is given, shown without its password), and the client's configuration of
//! the settings, TLS included.

use fred::prelude::{Config, ServerConfig};

use super::{check_client_name, LockConfig, Topology};
use crate::error::{Error, Result};
use crate::keys;

impl LockConfig {
    /// Checks the settings and builds fred's config, TLS included.
    pub(crate) fn to_fred(&self) -> Result<Config> {
        let config = self.fred_without_tls()?;
        self.with_tls(config)
    }

    /// [`to_fred`](Self::to_fred) for a later client of the same connect: the TLS of
    /// `template` (the connections' config, checked and built at connect) instead of
    /// building it again, which would read the system's roots again.
    pub(crate) fn to_fred_reusing_tls(&self, template: &Config) -> Result<Config> {
        #[cfg_attr(not(feature = "tls"), allow(unused_mut))]
        let mut config = self.fred_without_tls()?;
        #[cfg(feature = "tls")]
        {
            config.tls = template.tls.clone();
        }
        #[cfg(not(feature = "tls"))]
        let _ = template;
        Ok(config)
    }

    /// TLS as the URLs ask: `rediss://` is TLS or an error, never plaintext.
    fn with_tls(&self, mut config: Config) -> Result<Config> {
        let tls_urls = self.urls.iter().filter(|u| u.starts_with("rediss")).count();
        if tls_urls == 0 {
            #[cfg(feature = "tls")]
            if self.tls.ca_pem.is_some() || self.tls.client.is_some() || self.tls.skip_verification
            {
                return Err(Error::InvalidConfig(
                    "TLS settings were given for redis:// URLs, which are plaintext: use rediss://"
                        .into(),
                ));
            }
            return Ok(config);
        }
        if tls_urls != self.urls.len() {
            return Err(Error::InvalidConfig(
                "some URLs are rediss:// and some redis://: one cluster speaks one".into(),
            ));
        }
        #[cfg(feature = "tls")]
        {
            let rustls = crate::tls::client_config(&self.tls)?;
            config.tls = Some(fred::types::config::TlsConnector::from(rustls).into());
            Ok(config)
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = &mut config;
            Err(Error::InvalidConfig(format!(
                "{}: rediss:// asks for TLS, and this build of cluster-rwlock has none: enable its cargo feature `tls`",
                redact(&self.urls[0])
            )))
        }
    }

    /// Checks the settings and builds fred's config, without TLS.
    fn fred_without_tls(&self) -> Result<Config> {
        keys::check_prefix(&self.prefix)?;
        check_client_name(&self.client_name)?;
        self.check_lease(self.lease)?;
        if self.connections == 0 || self.connections > 64 {
            return Err(Error::InvalidConfig(format!(
                "{} connections per node: 1 to 64",
                self.connections
            )));
        }
        if self.retry_interval.is_zero() {
            return Err(Error::InvalidConfig("the retry interval is zero".into()));
        }
        if self.command_timeout.is_zero() {
            return Err(Error::InvalidConfig("the command timeout is zero".into()));
        }
        for url in &self.urls {
            check_scheme(url)?;
        }
        let first = self
            .urls
            .first()
            .ok_or_else(|| Error::InvalidConfig("no Redis URL given".into()))?;
        if self.topology != Topology::Cluster
            || self.urls.len() == 1 && first.contains("-cluster://")
        {
            return parse_url(first);
        }
        let mut config = parse_url(first)?;
        let mut hosts = Vec::new();
        for url in &self.urls {
            let one = parse_url(url)?;
            match one.server {
                ServerConfig::Centralized { server } => {
                    hosts.push((server.host.to_string(), server.port))
                }
                ServerConfig::Clustered { hosts: h, .. } => {
                    hosts.extend(h.into_iter().map(|s| (s.host.to_string(), s.port)))
                }
                _ => {
                    return Err(Error::InvalidConfig(format!(
                        "{}: not a node URL",
                        redact(url)
                    )))
                }
            }
        }
        config.server = ServerConfig::new_clustered(hosts);
        Ok(config)
    }
}

/// `url` without its password (`redis://user:***@host:port`), for messages and `Debug`.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            let user = userinfo.split_once(':').map_or("", |(u, _)| u);
            let shown = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                "***".to_string()
            };
            format!("{scheme}://{shown}{}", &rest[at..])
        }
        None => url.to_string(),
    }
}

/// Fred's config of one URL, after its scheme is checked: a malformed URL is
/// `InvalidConfig`, shown without its password.
pub(super) fn parse_url(url: &str) -> Result<Config> {
    check_scheme(url)?;
    // refused where it is given, not at connect
    #[cfg(not(feature = "tls"))]
    if url.starts_with("rediss") {
        return Err(Error::InvalidConfig(format!(
            "{}: rediss:// asks for TLS, and this build of cluster-rwlock has none: enable its cargo feature `tls`",
            redact(url)
        )));
    }
    Config::from_url(url).map_err(|e| Error::InvalidConfig(format!("{}: {e}", redact(url))))
}

pub(super) fn check_scheme(url: &str) -> Result<()> {
    let scheme = url.split("://").next().unwrap_or_default();
    if url.contains("://")
        && ["redis", "rediss", "redis-cluster", "rediss-cluster"].contains(&scheme)
    {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "{}: expected redis://, rediss://, redis-cluster:// or rediss-cluster://",
            redact(url)
        )))
    }
}
