//! Every test `ARCHITECTURE.md`'s Guarantees cite exists: a promise whose
//! test was renamed or removed would cite nothing. A citation is a
//! backticked path in a row's last column (`engine::kernel::a_test`,
//! `liveness::kernel::tests::a_test`, `engine::run::outbox`); its last
//! segment must name a `fn` or a `mod` (or a file of that name) somewhere
//! in the workspace's code.

use std::path::{Path, PathBuf};

/// The backticked paths in the last column of the Guarantees table.
fn citations(doc: &str) -> Vec<String> {
    let doc = format!("\n{doc}");
    let start = doc.find("\n## Guarantees").expect("a Guarantees section");
    let section = &doc[start + 1..];
    let section = section[1..]
        .find("\n## ")
        .map_or(section, |end| &section[..end + 1]);
    let mut found = Vec::new();
    for row in section.lines().filter(|line| line.starts_with("| ")) {
        let Some(proved_by) = row.rsplit(" | ").next() else {
            continue;
        };
        for quoted in proved_by.split('`').skip(1).step_by(2) {
            let segments: Vec<&str> = quoted.split("::").collect();
            let is_path = segments.len() > 1
                && segments.iter().all(|segment| {
                    !segment.is_empty()
                        && segment
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                });
            if is_path {
                found.push(quoted.to_string());
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

/// Whether `code` defines `fn name` or `mod name` (as whole words).
fn defines(code: &str, name: &str) -> bool {
    ["fn ", "mod "].iter().any(|item| {
        code.match_indices(&format!("{item}{name}"))
            .any(|(at, found)| {
                code[at + found.len()..]
                    .chars()
                    .next()
                    .is_none_or(|next| !(next.is_alphanumeric() || next == '_'))
            })
    })
}

#[test]
fn every_test_the_guarantees_cite_exists() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("read ARCHITECTURE.md");
    let cited = citations(&doc);
    assert!(
        cited.len() >= 50,
        "only {} citations found: is the table still there?",
        cited.len()
    );
    let mut files = Vec::new();
    for dir in ["src", "crates", "tests", "benches"] {
        sources(&root.join(dir), &mut files);
    }
    let code: Vec<(String, String)> = files
        .iter()
        .map(|file| {
            let stem = file
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            (stem, std::fs::read_to_string(file).unwrap_or_default())
        })
        .collect();
    let missing: Vec<&String> = cited
        .iter()
        .filter(|path| {
            let name = path.rsplit("::").next().expect("a segment");
            !code
                .iter()
                .any(|(stem, text)| stem == name || defines(text, name))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the Guarantees cite tests that do not exist: {missing:?}"
    );
}

#[test]
fn the_checker_reads_the_last_column_and_whole_names() {
    let doc = "## Guarantees\n\n| promise | proved by |\n|---|---|\n\
               | a `not::this` one | `engine::kernel::a_test` (and `x`), `b::c_d` |\n\
               ## Safety\n| `after::it` | `after::it` |\n";
    assert_eq!(citations(doc), ["engine::kernel::a_test", "b::c_d"]);
    assert!(defines("async fn a_test() {}", "a_test"));
    assert!(!defines("fn a_test_longer() {}", "a_test"));
    assert!(defines("mod outbox;", "outbox"));
}
