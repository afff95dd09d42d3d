//! What the CLI prints of text it did not choose (lock names, owner tokens, client
//! names, replies: any application that may take a lock chooses them), and how it
//! prints. Control characters, and the characters that hide or reorder text, are shown
//! escaped, as `ls` and git quote names, so that no name can move the cursor, recolour,
//! retitle or rewrite the operator's terminal. `--json` needs none of this: JSON
//! escapes control characters itself.
//!
//! Every line goes out through [`line`]: when the reader has gone (`watch | head`), the
//! command ends quietly, as a process killed by `SIGPIPE` would, not with a panic.

use std::borrow::Cow;
use std::fmt::{Display, Write as _};
use std::io::Write as _;

/// `s` as it may be shown on a terminal: a backslash doubled, a control character or an
/// invisible or bidirectional formatting character as `\x1b` or `\u{202e}`; anything
/// else as it is (other scripts too).
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\\' {
            out.push_str("\\\\");
        } else if !needs_escape(c) {
            out.push(c);
        } else if u32::from(c) < 0x100 {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        } else {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
    Cow::Owned(out)
}

/// Control characters (C0, DEL, C1), and the zero-width and bidirectional formatting
/// characters that make a name read as another.
fn needs_escape(c: char) -> bool {
    c == '\\'
        || c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// Prints one line on stdout. A closed pipe ends the process at once, quietly, with
/// status 0 (the reader took what it wanted; nothing this command holds outlives it
/// but by its lease, and `list`, `inspect` and `watch` hold nothing); another write
/// error ends it with status 74 (`EX_IOERR`).
pub fn line(text: impl Display) {
    let mut out = std::io::stdout().lock();
    let written = writeln!(out, "{text}").and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "cluster-rwlock: cannot write: {e}");
        std::process::exit(74);
    }
}

/// Writes `bytes` to standard output as they are, as [`line`] writes a line (the same
/// exits on a closed pipe or a write error).
pub fn bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let written = out.write_all(bytes).and_then(|()| out.flush());
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        let _ = writeln!(std::io::stderr(), "cluster-rwlock: cannot write: {e}");
        std::process::exit(74);
    }
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn plain_names_are_shown_as_they_are() {
        for s in ["orders:{42}", "façade-π:{日本}", ""] {
            assert_eq!(escaped(s), s);
            assert!(matches!(escaped(s), std::borrow::Cow::Borrowed(_)));
        }
    }

    #[test]
    fn control_and_formatting_characters_are_escaped() {
        assert_eq!(
            escaped("evil\x1b[31mRED\x1b[0m:{1}"),
            "evil\\x1b[31mRED\\x1b[0m:{1}"
        );
        assert_eq!(escaped("op\x1b[2Kname"), "op\\x1b[2Kname");
        assert_eq!(
            escaped("a\nb\tc\rd\x7f\u{9b}"),
            "a\\x0ab\\x09c\\x0dd\\x7f\\x9b"
        );
        // a right-to-left override makes "txt.exe" read as "exe.txt"
        assert_eq!(escaped("abc\u{202e}txt.exe"), "abc\\u{202e}txt.exe");
        assert_eq!(escaped("zero\u{200b}width"), "zero\\u{200b}width");
        // a backslash is doubled: an escape shown is never a name's own text
        assert_eq!(escaped("a\\x1b"), "a\\\\x1b");
    }

    #[test]
    fn nothing_escaped_contains_a_control_character() {
        for c in (0u32..0x3000).filter_map(char::from_u32) {
            let s = format!("x{c}y");
            assert!(!escaped(&s).chars().any(|c| c.is_control()), "{c:?}");
        }
    }
}
