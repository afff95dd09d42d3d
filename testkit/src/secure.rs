//! TLS clusters and ACL files: the certificates a TLS cluster is started with (made at
//! its start with `rcgen`, no OpenSSL needed), the ACL file, the directory that holds
//! them, and the server options that use them.
//!
//! A TLS node listens on two ports: its TLS port (`port + 20000`), the only one its
//! clients are given ([`NodeInfo::url`](super::NodeInfo::url) and
//! [`TestCluster::seed_urls`](super::TestCluster::seed_urls) are `rediss://`), and its
//! plain port, which only the test bed's own admin commands use (forming the cluster,
//! faults, readiness). The cluster bus and the replication stream run over TLS
//! (`tls-cluster yes`, `tls-replication yes`); the bus stays on `port + 10000`. Over TLS,
//! `CLUSTER SLOTS`, `CLUSTER NODES` and redirections name the TLS ports, so a client seeded
//! with `rediss://` URLs never learns of a plain port.

use std::fmt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use super::reaper::tell_reaper;
use super::session::session_id;
use super::TestkitError;

/// How far above its plain port a TLS node's TLS port is.
pub(super) const TLS_PORT_OFFSET: u16 = 20000;
/// Where a container sees the cluster's configuration directory.
pub(super) const CONF_MOUNT: &str = "/conf";
/// The ACL file's name in that directory.
const ACL_FILE: &str = "users.acl";

/// The certificates of a TLS cluster ([`StartOptions::tls`](super::StartOptions::tls)):
/// a CA made for this cluster alone, and a client certificate it signed (for mutual
/// TLS; the nodes accept clients without one too, `tls-auth-clients optional`). The
/// nodes' own certificate names `127.0.0.1` and `localhost`. Its `Debug` shows the
/// files, never the keys.
///
/// ```no_run
/// # async fn demo() -> Result<(), cluster_rwlock_testkit::TestkitError> {
/// use cluster_rwlock_testkit::{StartOptions, TestCluster};
///
/// let cluster = TestCluster::start_with(StartOptions::default().tls(true)).await?;
/// let tls = cluster.tls().expect("a TLS cluster");
/// assert!(tls.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
/// assert!(cluster.seed_urls()[0].starts_with("rediss://"));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct TlsFiles {
    dir: PathBuf,
    ca_pem: String,
    client_cert_pem: String,
    client_key_pem: String,
}

impl fmt::Debug for TlsFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsFiles")
            .field("ca_file", &self.ca_file())
            .field("client_cert_file", &self.client_cert_file())
            .field("client_key_file", &"<not shown>")
            .finish()
    }
}

impl TlsFiles {
    /// The CA certificate that signed the nodes' certificate, in PEM.
    ///
    /// ```no_run
    /// # fn demo(tls: &cluster_rwlock_testkit::TlsFiles) {
    /// let ca: Vec<u8> = tls.ca_pem().as_bytes().to_vec();
    /// # }
    /// ```
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate's file (`ca.pem`), for tools such as `redis-cli --cacert`.
    ///
    /// ```no_run
    /// # fn demo(tls: &cluster_rwlock_testkit::TlsFiles) {
    /// assert!(tls.ca_file().ends_with("ca.pem"));
    /// # }
    /// ```
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A client certificate signed by the same CA, in PEM.
    ///
    /// ```no_run
    /// # fn demo(tls: &cluster_rwlock_testkit::TlsFiles) {
    /// let (cert, key) = (tls.client_cert_pem(), tls.client_key_pem());
    /// # }
    /// ```
    pub fn client_cert_pem(&self) -> &str {
        &self.client_cert_pem
    }

    /// The client certificate's private key, in PEM (PKCS #8).
    ///
    /// ```no_run
    /// # fn demo(tls: &cluster_rwlock_testkit::TlsFiles) {
    /// assert!(tls.client_key_pem().contains("PRIVATE KEY"));
    /// # }
    /// ```
    pub fn client_key_pem(&self) -> &str {
        &self.client_key_pem
    }

    /// The client certificate's file (`client.pem`); its key is in `client.key` beside it.
    ///
    /// ```no_run
    /// # fn demo(tls: &cluster_rwlock_testkit::TlsFiles) {
    /// assert!(tls.client_cert_file().ends_with("client.pem"));
    /// # }
    /// ```
    pub fn client_cert_file(&self) -> PathBuf {
        self.dir.join("client.pem")
    }
}

/// The configuration directory of a cluster started with TLS or an ACL file: made on
/// this machine, mounted whole into each container at [`CONF_MOUNT`].
#[derive(Debug, Clone)]
pub(super) struct SecureConf {
    pub(super) dir: PathBuf,
    pub(super) tls: Option<TlsFiles>,
    pub(super) acl: bool,
}

impl SecureConf {
    /// Makes the directory, the certificates when `tls`, and the ACL file from `acl`
    /// (lines of ACL rules) when given; `None` when neither is asked for.
    pub(super) fn make(tls: bool, acl: &[String]) -> Result<Option<SecureConf>, TestkitError> {
        if !tls && acl.is_empty() {
            return Ok(None);
        }
        static CLUSTERS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = CLUSTERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("cluster-rwlock-{}-conf{n}", session_id()));
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        tell_reaper(&format!("dir:{}", dir.display()));
        let tls = if tls { Some(certificates(&dir)?) } else { None };
        if !acl.is_empty() {
            check_acl(acl)?;
            let file = dir.join(ACL_FILE);
            std::fs::write(&file, acl.join("\n") + "\n").map_err(|e| io_error(&file, e))?;
        }
        Ok(Some(SecureConf {
            dir,
            tls,
            acl: !acl.is_empty(),
        }))
    }

    /// The server options of the node on `port` whose configuration directory is seen
    /// at `inside`.
    pub(super) fn args(&self, port: u16, inside: &str) -> Vec<String> {
        let mut args = Vec::new();
        if self.tls.is_some() {
            let tls_port = (port + TLS_PORT_OFFSET).to_string();
            let bus_port = (port + 10000).to_string();
            args.extend(
                [
                    "--tls-port",
                    &tls_port,
                    "--tls-cert-file",
                    &format!("{inside}/node.pem"),
                    "--tls-key-file",
                    &format!("{inside}/node.key"),
                    "--tls-ca-cert-file",
                    &format!("{inside}/ca.pem"),
                    "--tls-cluster",
                    "yes",
                    "--tls-replication",
                    "yes",
                    // clients without a certificate are let in, those with one verified
                    "--tls-auth-clients",
                    "optional",
                    // the bus would follow the TLS port (+10000) otherwise: kept where
                    // the faults expect it
                    "--cluster-port",
                    &bus_port,
                ]
                .map(String::from),
            );
        }
        if self.acl {
            args.extend(["--aclfile".to_string(), format!("{inside}/{ACL_FILE}")]);
        }
        args
    }
}

/// The test bed's admin commands connect as the `default` user without a password: an
/// ACL file that redefines it would lock them out.
fn check_acl(lines: &[String]) -> Result<(), TestkitError> {
    match lines
        .iter()
        .find(|l| l.split_whitespace().take(2).eq(["user", "default"]))
    {
        Some(_) => Err(TestkitError::Command(
            "the ACL file may not redefine the user `default`: the test bed's own commands connect as it".into(),
        )),
        None => Ok(()),
    }
}

fn io_error(path: &Path, e: std::io::Error) -> TestkitError {
    TestkitError::Command(format!("{}: {e}", path.display()))
}

fn rcgen_error(e: rcgen::Error) -> TestkitError {
    TestkitError::Command(format!("making the TLS certificates: {e}"))
}

/// A CA; the nodes' certificate (for `127.0.0.1` and `localhost`, server and client use:
/// the nodes present it to each other on the bus and for replication); a client
/// certificate. All in `dir`.
fn certificates(dir: &Path) -> Result<TlsFiles, TestkitError> {
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "cluster-rwlock testkit CA");
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().map_err(rcgen_error)?)
        .map_err(rcgen_error)?;

    let leaf = |names: Vec<String>, cn: &str, usages: Vec<ExtendedKeyUsagePurpose>| {
        let mut params = CertificateParams::new(names).map_err(rcgen_error)?;
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = usages;
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let cert = params.signed_by(&key, &ca).map_err(rcgen_error)?;
        Ok::<_, TestkitError>((cert.pem(), key.serialize_pem()))
    };
    let (node_cert, node_key) = leaf(
        vec!["127.0.0.1".into(), "localhost".into()],
        "cluster-rwlock testkit node",
        vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    )?;
    let (client_cert, client_key) = leaf(
        Vec::new(),
        "cluster-rwlock testkit client",
        vec![ExtendedKeyUsagePurpose::ClientAuth],
    )?;
    let ca_pem = ca.pem();
    for (name, text) in [
        ("ca.pem", &ca_pem),
        ("node.pem", &node_cert),
        ("node.key", &node_key),
        ("client.pem", &client_cert),
        ("client.key", &client_key),
    ] {
        let file = dir.join(name);
        std::fs::write(&file, text).map_err(|e| io_error(&file, e))?;
    }
    Ok(TlsFiles {
        dir: dir.to_path_buf(),
        ca_pem,
        client_cert_pem: client_cert,
        client_key_pem: client_key,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_acl_file_keeps_the_default_user() {
        assert!(check_acl(&["user app on >pw ~app:* +@all".into()]).is_ok());
        assert!(check_acl(&["user  default on >pw +@all".into()]).is_err());
    }

    #[test]
    fn certificates_are_pem_and_signed_by_their_ca() {
        let dir = std::env::temp_dir().join(format!("testkit-certs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = certificates(&dir).unwrap();
        assert!(files.ca_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(files.client_key_pem().contains("PRIVATE KEY"));
        let node = std::fs::read_to_string(dir.join("node.pem")).unwrap();
        assert_ne!(node, files.ca_pem());
        assert!(!format!("{files:?}").contains("PRIVATE KEY"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn tls_options_keep_the_bus_port() {
        let conf = SecureConf {
            dir: PathBuf::from("/x"),
            tls: Some(TlsFiles {
                dir: PathBuf::from("/x"),
                ca_pem: String::new(),
                client_cert_pem: String::new(),
                client_key_pem: String::new(),
            }),
            acl: true,
        };
        let args = conf.args(20000, "/conf").join(" ");
        assert!(args.contains("--tls-port 40000"), "{args}");
        assert!(args.contains("--cluster-port 30000"), "{args}");
        assert!(
            args.contains("--tls-cluster yes --tls-replication yes"),
            "{args}"
        );
        assert!(args.contains("--aclfile /conf/users.acl"), "{args}");
    }
}
