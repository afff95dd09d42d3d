//! TLS for `rediss://` URLs (cargo feature `tls`): rustls with the `ring` provider, so no
//! system OpenSSL is needed. Every connection the client opens (per-node command
//! connections, subscribers, the topology watch, connections to promoted replicas)
//! is made from one template, which carries this configuration.

use std::sync::Arc;

use fred::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use fred::rustls::crypto::{ring, verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use fred::rustls::pki_types::pem::PemObject;
use fred::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use fred::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, Result};

/// What `LockConfig` was told about TLS.
#[derive(Clone, Default)]
pub(crate) struct TlsSettings {
    /// PEM of the certificate authorities to trust instead of the system's.
    pub ca_pem: Option<Vec<u8>>,
    /// PEM of the client certificate chain and of its private key (mutual TLS).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
    /// Accept any server certificate (tests only).
    pub skip_verification: bool,
}

impl std::fmt::Debug for TlsSettings {
    // never the key; the rest only as what is set
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca", &self.ca_pem.as_ref().map(|_| "<pem>"))
            .field(
                "client_auth",
                &self.client.as_ref().map(|_| "<cert and key>"),
            )
            .field("skip_verification", &self.skip_verification)
            .finish()
    }
}

fn invalid(what: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("TLS: {what}"))
}

/// The rustls configuration for `settings`: the given CAs or the system's roots, host
/// names (or IP addresses) checked against the certificate, a client certificate when
/// given.
pub(crate) fn client_config(settings: &TlsSettings) -> Result<ClientConfig> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(invalid)?;
    let builder = if settings.skip_verification {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        match &settings.ca_pem {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| invalid(format!("the CA bundle: {e}")))?;
                    roots
                        .add(cert)
                        .map_err(|e| invalid(format!("the CA bundle: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(invalid("the CA bundle holds no certificate"));
                }
            }
            None => {
                let found = fred::rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // a system certificate rustls cannot read is skipped, as browsers do
                    let _ = roots.add(cert);
                }
                if roots.is_empty() {
                    return Err(invalid(
                        "no system root certificates were found; give the CA with LockConfig::tls_ca_pem",
                    ));
                }
            }
        }
        builder.with_root_certificates(roots)
    };
    match &settings.client {
        None => Ok(builder.with_no_client_auth()),
        Some((cert_pem, key_pem)) => {
            let chain = CertificateDer::pem_slice_iter(cert_pem)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("the client certificate: {e}")))?;
            if chain.is_empty() {
                return Err(invalid("the client certificate file holds no certificate"));
            }
            // the key's own error may quote it: say only that it could not be read
            let key = PrivateKeyDer::from_pem_slice(key_pem)
                .map_err(|_| invalid("the client key is not a PEM private key"))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(format!("the client certificate and key: {e}")))
        }
    }
}

/// Accepts every server certificate, checking only the handshake's signatures: for
/// tests against self-signed servers, never for production.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, fred::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, fred::rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, fred::rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_pem_is_a_typed_error_that_never_quotes_the_key() {
        let settings = TlsSettings {
            ca_pem: Some(b"not a certificate".to_vec()),
            ..TlsSettings::default()
        };
        assert!(matches!(
            client_config(&settings),
            Err(Error::InvalidConfig(_))
        ));
        let secret =
            "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n";
        let settings = TlsSettings {
            client: Some((b"no cert".to_vec(), secret.as_bytes().to_vec())),
            skip_verification: true,
            ..TlsSettings::default()
        };
        let e = client_config(&settings).expect_err("no certificate");
        assert!(!e.to_string().contains("c2VjcmV0"), "{e}");
        assert!(!format!("{settings:?}").contains("c2VjcmV0"));
        let ok = TlsSettings {
            skip_verification: true,
            ..TlsSettings::default()
        };
        assert!(client_config(&ok).is_ok());
    }
}
