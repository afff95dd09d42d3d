//! The unit tests of `config`.

use super::*;

#[test]
fn bad_configurations_are_typed_errors() {
    let ok = LockConfig::cluster(["redis://127.0.0.1:7000"]);
    assert!(ok.to_fred().is_ok());
    for bad in [
        ok.clone().lease(Duration::from_millis(10)),
        ok.clone().connections(0),
        ok.clone().retry_interval(Duration::ZERO),
        ok.clone().command_timeout(Duration::ZERO),
        ok.clone().prefix("a{b}"),
        LockConfig::cluster(["http://127.0.0.1:7000"]),
        LockConfig::cluster(Vec::<String>::new()),
    ] {
        assert!(
            matches!(bad.to_fred(), Err(Error::InvalidConfig(_))),
            "{bad:?}"
        );
    }
}

#[test]
fn client_names_are_checked_and_default_to_pid_at_host() {
    let base = LockConfig::cluster(["redis://a:7000"]);
    let name = base.get_client_name().to_string();
    assert!(
        name.starts_with(&format!("{}@", std::process::id())),
        "{name}"
    );
    assert!(check_client_name(&name).is_ok(), "{name}");
    assert!(base
        .clone()
        .client_name("publisher@host-a")
        .to_fred()
        .is_ok());
    for bad in [
        "",
        "a b",
        "a/b",
        &"x".repeat(65),
        "op\x1b[2Kname",
        "a\u{9b}b",
    ] {
        assert!(
            matches!(
                base.clone().client_name(bad).to_fred(),
                Err(Error::InvalidConfig(_))
            ),
            "{bad:?}"
        );
    }
}

#[test]
fn passwords_never_show() {
    assert_eq!(redact("redis://:s3cret@h:1"), "redis://:***@h:1");
    assert_eq!(
        redact("rediss://app:s3cret@h:1/0"),
        "rediss://app:***@h:1/0"
    );
    assert_eq!(redact("redis://s3cret@h:1"), "redis://***@h:1");
    assert_eq!(redact("redis://h:1"), "redis://h:1");
    assert_eq!(redact("nonsense s3cret"), "nonsense s3cret");
    let config = LockConfig::cluster(["redis://app:s3cret@a:7000", "redis://:s3cret@b:1"]);
    assert!(!format!("{config:?}").contains("s3cret"), "{config:?}");
    let e = LockConfig::cluster(["http://app:s3cret@a:7000"])
        .to_fred()
        .unwrap_err();
    assert!(!e.to_string().contains("s3cret"), "{e}");
    let e = LockConfig::from_url("redis://app:s3cret@[bad").unwrap_err();
    assert!(!e.to_string().contains("s3cret"), "{e}");
}

#[test]
fn rediss_is_tls_or_an_error_never_plaintext() {
    let tls = LockConfig::cluster(["rediss://app:s3cret@a:7000"]).to_fred();
    #[cfg(feature = "tls")]
    assert!(tls.unwrap().tls.is_some());
    #[cfg(not(feature = "tls"))]
    match tls {
        Err(Error::InvalidConfig(text)) => {
            assert!(text.contains("cargo feature `tls`"), "{text}");
            assert!(!text.contains("s3cret"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    let mixed = LockConfig::cluster(["rediss://a:7000", "redis://b:7001"]).to_fred();
    assert!(matches!(mixed, Err(Error::InvalidConfig(_))));
    #[cfg(feature = "tls")]
    assert!(LockConfig::cluster(["redis://a:7000"])
        .to_fred()
        .unwrap()
        .tls
        .is_none());
}

#[test]
fn urls_are_checked_by_scheme() {
    for good in [
        "redis://h:1",
        "rediss://h:1",
        "redis-cluster://h:1",
        "rediss-cluster://h:1",
    ] {
        assert!(check_scheme(good).is_ok(), "{good}");
    }
    for bad in ["h:1", "http://h:1", "redis:/h", ""] {
        assert!(check_scheme(bad).is_err(), "{bad}");
    }
    assert!(LockConfig::from_url("not a url").is_err());
    assert!(LockConfig::from_url("redis://127.0.0.1:6379").is_ok());
    // TLS asked of a build without it: refused where it is given
    let tls = LockConfig::from_url("rediss://app:s3cret@127.0.0.1:6380");
    if cfg!(feature = "tls") {
        assert!(tls.is_ok());
    } else {
        let e = tls.unwrap_err().to_string();
        assert!(e.contains("feature `tls`") && !e.contains("s3cret"), "{e}");
    }
}

#[test]
fn several_seeds_make_one_clustered_config() {
    let c = LockConfig::cluster(["redis://a:7000", "redis://b:7001"])
        .to_fred()
        .unwrap();
    match c.server {
        ServerConfig::Clustered { hosts, .. } => assert_eq!(hosts.len(), 2),
        other => panic!("{other:?}"),
    }
}
