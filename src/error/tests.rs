//! The unit tests of `error`.

#[test]
fn errors_stay_small() {
    // every `Result` of the crate carries one, and every future that holds a result
    let size = std::mem::size_of::<super::Error>();
    eprintln!("size of Error: {size} bytes");
    assert!(size <= 56, "{size}");
}

use super::*;
use fred::error::{Error as FredError, ErrorKind};

fn client(kind: ErrorKind, text: &'static str) -> Error {
    Error::from_client(FredError::new(kind, text))
}

#[test]
fn server_replies_are_server_errors_with_their_code() {
    let noperm = client(
        ErrorKind::Auth,
        "NOPERM User x has no permissions to run the 'evalsha' command",
    );
    let Error::Server(reply) = &noperm else {
        panic!("{noperm:?}")
    };
    assert_eq!(reply.code(), "NOPERM");
    assert_eq!(
        reply.message(),
        "User x has no permissions to run the 'evalsha' command"
    );
    assert!(noperm.is_permission_denied() && !noperm.is_retryable());
    let moved = client(ErrorKind::Cluster, "MOVED 1 x:1");
    assert!(moved.server().is_some_and(ServerError::is_redirect));
    assert!(moved.is_retryable() && !moved.is_unavailable());
    let down = client(ErrorKind::Unknown, "CLUSTERDOWN The cluster is down");
    assert!(down.is_retryable());
    assert_eq!(
        down.to_string(),
        "the server answered: CLUSTERDOWN The cluster is down"
    );
    let script = client(ErrorKind::Unknown, "ERR user_script:1: oops");
    assert!(!script.is_retryable() && !script.is_unavailable());
}

#[test]
fn retryable_and_unavailable_errors_are_told_apart() {
    let io = client(ErrorKind::IO, "connection reset");
    assert!(io.is_retryable() && io.is_unavailable());
    assert!(matches!(&io, Error::Connection(c) if c.kind() == ConnectionErrorKind::Io));
    // the client's words when a node's connection is down: nothing was sent
    let unrouted = client(ErrorKind::Unknown, "Failed to route command.");
    assert!(unrouted.is_retryable() && unrouted.is_unavailable());
    assert!(matches!(&unrouted, Error::Connection(c) if c.kind() == ConnectionErrorKind::NotSent));
    #[cfg(feature = "tls")]
    {
        let tls = client(ErrorKind::Tls, "handshake failed");
        assert!(!tls.is_retryable() && !tls.is_unavailable());
    }
    assert!(matches!(
        client(ErrorKind::Config, "bad"),
        Error::InvalidConfig(_)
    ));
    assert!(Error::Unavailable("x:1 did not answer in 1s".into()).is_unavailable());
    assert!(Error::Timeout(Duration::from_secs(1)).is_retryable());
    assert!(Error::NotReplicated {
        wanted: 1,
        acked: 0,
        silent: Vec::new(),
    }
    .is_retryable());
    for e in [
        Error::LockLost,
        Error::Broken {
            client: "worker-7@host-b".into(),
        },
        Error::UpgradeDeadlock,
        Error::InvalidOwner("a b".into()),
        Error::InvalidName(String::new()),
        Error::Closed,
    ] {
        assert!(!e.is_retryable() && !e.is_unavailable(), "{e:?}");
    }
}

#[test]
fn errors_read_as_sentences_and_name_the_node() {
    let refused = FredError::from(std::io::Error::from_raw_os_error(111));
    let e = Error::Connect {
        addr: "127.0.0.1:7000".into(),
        source: Box::new(Error::from_client(refused)),
    };
    let text = e.to_string();
    assert_eq!(
        text,
        "could not connect to 127.0.0.1:7000: connection refused"
    );
    assert!(e.is_retryable() && e.is_unavailable());
    let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
    assert_eq!(
        Error::from_client(FredError::from(io)).to_string(),
        "connection refused: Connection refused"
    );
    let tls = client(
        ErrorKind::IO,
        "Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) }",
    );
    assert_eq!(
        tls.to_string(),
        "invalid data: InvalidCertificate(UnknownIssuer)"
    );
    let wrong = Error::Connect {
        addr: "a:1".into(),
        source: Box::new(client(ErrorKind::Auth, "WRONGPASS invalid password")),
    };
    assert_eq!(
        wrong.to_string(),
        "could not connect to a:1: the server answered: WRONGPASS invalid password"
    );
    assert!(wrong.is_permission_denied());
}

#[test]
fn the_client_error_is_the_source() {
    use std::error::Error as _;
    let e = client(ErrorKind::IO, "connection reset");
    let Error::Connection(c) = &e else {
        panic!("{e:?}")
    };
    let source = c.source().expect("a source");
    assert!(source.to_string().contains("connection reset"), "{source}");
}
