//! The documents cannot drift from what CI runs: every shell command of the README, of
//! `docs/TESTBED.md` and of `docs/PYTHON.md` is in `.ci/run` as written, or names the step of `.ci/run` that
//! runs it (`# CI: <step>`), or says why CI cannot (`# not in CI: <why>`).
//!
//! And the map cannot drift from the code: docs/DESIGN.md's layer tables name every
//! module of `src/` and `cli/src/`, and no module imports one of a higher layer.

/// The commands of the ```sh blocks of `doc`, a line ending in `\` joined to the
/// next, with their comment.
fn shell_commands(doc: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (mut in_sh, mut pending) = (false, String::new());
    for line in doc.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            in_sh = t == "```sh";
            continue;
        }
        if !in_sh || t.is_empty() || t.starts_with('#') {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head.trim_end());
            pending.push(' ');
            continue;
        }
        let whole = format!("{pending}{t}");
        pending.clear();
        let (command, comment) = match whole.split_once("  # ") {
            Some((c, k)) => (c.trim().to_string(), k.trim().to_string()),
            None => (whole.trim().to_string(), String::new()),
        };
        out.push((command, comment));
    }
    out
}

#[test]
fn every_documented_command_runs_in_ci_or_says_why_not() {
    let ci = include_str!("../.ci/run");
    let mut checked = 0;
    for (doc, text) in [
        ("README.md", include_str!("../README.md")),
        ("docs/TESTBED.md", include_str!("../docs/TESTBED.md")),
        ("docs/PYTHON.md", include_str!("../docs/PYTHON.md")),
    ] {
        for (command, comment) in shell_commands(text) {
            checked += 1;
            if ci.lines().any(|l| l.trim() == command) {
                continue;
            }
            if let Some(step) = comment.strip_prefix("CI: ") {
                let step = step.split_whitespace().next().unwrap_or_default();
                assert!(
                    !step.is_empty() && ci.contains(step),
                    "{doc}: `{command}` names the CI step `{step}`, which .ci/run has not"
                );
                continue;
            }
            assert!(
                comment.starts_with("not in CI: "),
                "{doc}: `{command}` is not in .ci/run (add it, or say `# CI: <step>` or `# not in CI: <why>`)"
            );
        }
    }
    assert!(checked >= 10, "{checked} commands found");
}

/// The test targets a manifest lists: each `[[test]]`'s path (given, or the default
/// from its name).
fn listed_tests(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut in_test, mut name, mut path) = (false, None::<String>, None::<String>);
    let mut flush = |name: &mut Option<String>, path: &mut Option<String>| {
        if let Some(p) = path.take() {
            out.push(p);
        } else if let Some(n) = name.take() {
            out.push(format!("tests/{n}.rs"));
            out.push(format!("tests/{n}/main.rs"));
        }
        *name = None;
    };
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            if in_test {
                flush(&mut name, &mut path);
            }
            in_test = t == "[[test]]";
            continue;
        }
        let value = |key: &str| {
            t.strip_prefix(key)
                .map(str::trim_start)
                .and_then(|r| r.strip_prefix('='))
                .map(|v| v.trim().trim_matches('"').to_string())
        };
        if in_test {
            name = value("name").or(name);
            path = value("path").or(path);
        }
    }
    if in_test {
        flush(&mut name, &mut path);
    }
    out
}

/// With `autotests = false`, a test file the manifest does not list is never built
/// and nothing says so: every `tests/*.rs` (and `tests/*/main.rs`) of each crate that
/// lists its tests is listed.
#[test]
fn every_test_file_is_listed_in_its_manifest() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for krate in [".", "cli", "testkit"] {
        let dir = root.join(krate);
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("autotests = false"), "{krate}: autotests");
        let listed = listed_tests(&manifest);
        for entry in std::fs::read_dir(dir.join("tests")).unwrap() {
            let entry = entry.unwrap();
            let file = entry.file_name().to_string_lossy().to_string();
            let target = if entry.path().is_dir() {
                if !entry.path().join("main.rs").exists() {
                    continue; // modules of a test, not a test of its own
                }
                format!("tests/{file}/main.rs")
            } else if let Some(stem) = file.strip_suffix(".rs") {
                format!("tests/{stem}.rs")
            } else {
                continue;
            };
            seen += 1;
            assert!(
                listed.contains(&target),
                "{krate}/{target} is not listed in {krate}/Cargo.toml: cargo never builds it"
            );
        }
    }
    assert!(seen >= 15, "{seen} test files found");
}

#[test]
fn the_manifest_reader_finds_names_and_paths() {
    let listed = listed_tests(
        "[package]\nname = \"x\"\n[[test]]\nname = \"a\"\n\n[[test]]\nname = \"b\"\npath = \"tests/b/run.rs\"\n[features]\n",
    );
    assert_eq!(listed, ["tests/a.rs", "tests/a/main.rs", "tests/b/run.rs"]);
}

/// One layer table of docs/DESIGN.md (the one after `heading`): each module's layer.
fn layer_table(design: &str, heading: &str) -> Vec<(String, u32)> {
    let start = design.find(heading).expect("the table's heading");
    let mut out = Vec::new();
    let mut in_table = false;
    for line in design[start..].lines().skip(1) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 4 {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let Ok(layer) = cells[1].parse::<u32>() else {
            continue; // the header, or the line under it
        };
        for module in cells[2].split(',') {
            out.push((module.trim().trim_matches('`').to_string(), layer));
        }
    }
    out
}

/// The code of a Rust file: each line up to its `//` comment (a `://` in a URL is kept).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut cut = line.len();
        let bytes = line.as_bytes();
        for i in 0..bytes.len().saturating_sub(1) {
            if bytes[i] == b'/' && bytes[i + 1] == b'/' && (i == 0 || bytes[i - 1] != b':') {
                cut = i;
                break;
            }
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

/// The modules a file's code names by `crate::<module>`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 {
            let before = code.as_bytes()[at - 1];
            if before.is_ascii_alphanumeric() || before == b'_' {
                continue; // `other_crate::`
            }
        }
        let name: String = code[at + 7..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

/// Every `.rs` file under `dir`, with the top module it belongs to (`a.rs` and `a/...`
/// are `a`).
fn modules_of(dir: &std::path::Path) -> Vec<(String, std::path::PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).unwrap();
                let first = rel.components().next().unwrap().as_os_str();
                let top = first.to_string_lossy().trim_end_matches(".rs").to_string();
                out.push((top, path));
            }
        }
    }
    out
}

/// Checks one crate's `src` against its table: the arrows that run up, and the modules
/// the table lacks or names wrongly.
fn layer_faults(src: &std::path::Path, table: &[(String, u32)], root: &str) -> Vec<String> {
    let layer = |m: &str| table.iter().find(|(n, _)| n == m).map(|(_, l)| *l);
    let mut faults = Vec::new();
    let files = modules_of(src);
    for (top, path) in &files {
        if top == root {
            continue; // the crate's root names every module
        }
        let Some(from) = layer(top) else {
            faults.push(format!(
                "{}: module `{top}` is not in the map",
                path.display()
            ));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(path).unwrap());
        for to in crate_paths(&code) {
            match layer(&to) {
                Some(l) if l > from => faults.push(format!(
                    "{}: `{top}` (layer {from}) imports `{to}` (layer {l})",
                    path.display()
                )),
                _ => {}
            }
        }
    }
    for (name, _) in table {
        if !files.iter().any(|(top, _)| top == name) {
            faults.push(format!(
                "the map names `{name}`, which {} has not",
                src.display()
            ));
        }
    }
    faults
}

/// docs/DESIGN.md's layer tables hold every module of `src/` and of `cli/src/`, and no
/// module names one of a higher layer (a test's `use super::*` names its own).
#[test]
fn no_module_imports_a_higher_layer() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = include_str!("../docs/DESIGN.md");
    let library = layer_table(design, "In `src/`, from the top down");
    assert!(library.len() >= 20, "{library:?}");
    let mut faults = layer_faults(&root.join("src"), &library, "lib");
    let cli = root.join("cli/src");
    if cli.exists() {
        let table = layer_table(design, "The command line (`cli/src/`)");
        assert!(table.len() >= 15, "{table:?}");
        faults.extend(layer_faults(&cli, &table, "-"));
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

#[test]
fn the_layer_check_reads_paths_and_skips_comments() {
    let code = code_of(
        "use crate::a::B; // crate::zz\nlet u = \"redis://x\"; crate::c(); other_crate::d();",
    );
    assert_eq!(crate_paths(&code), ["a", "c"]);
    let table = layer_table(
        "## x\nIn `src/`, from the top down\n\n| layer | modules | what |\n|---|---|---|\n| 2 | `a`, `b` | x |\n| 1 | `c` | y |\n\nafter\n| 9 | `z` | no |\n",
        "In `src/`, from the top down",
    );
    assert_eq!(table, [("a".into(), 2), ("b".into(), 2), ("c".into(), 1)]);
}
