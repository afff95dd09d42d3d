//! The unit tests of `lock`.

use super::client_name_of;

#[test]
fn client_names_are_read_from_owner_tokens_of_their_shape() {
    let random = "c734d57db2c34e179d1065b595a90956";
    assert_eq!(
        client_name_of(&format!("publisher@host-a/{random}:17")),
        Some("publisher@host-a")
    );
    assert_eq!(
        client_name_of(&format!("42@web-3/{random}:0")),
        Some("42@web-3")
    );
    for other in [
        "job-17".to_string(),
        format!("{random}:17"),
        format!("/{random}:17"),
        format!("a/{random}"),
        format!("a/{random}:"),
        format!("a/{random}:x"),
        "a/short:1".to_string(),
    ] {
        assert_eq!(client_name_of(&other), None, "{other}");
    }
}
