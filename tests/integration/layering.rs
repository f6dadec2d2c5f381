//! The layering inside each crate is a test, not a convention: its
//! `lib.rs` (`crates/core/src/lib.rs`, `crates/tui/src/lib.rs`,
//! `src/lib.rs`) declares its modules
//! in the order data flows, and a module may use only the modules
//! declared before it (and itself); between crates, the compiler keeps
//! the order (a crate names only what it depends on). Every path that
//! names a module of the crate counts — `crate::x`, `crate::{x, y}`, and
//! `super::` chains that climb to the crate root — in production code and
//! in tests alike; comments do not.
//!
//! The seed (`context` and `locks`) is the crate `crates/locks`, below
//! both (it depends on nothing of locktop's). Inside `tui/` this test
//! does not look: its views draw a `ViewState` and never name the app
//! (ARCHITECTURE.md says the shape).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The top-level modules in the order `src/lib.rs` declares them.
fn declared_order(src: &Path) -> Vec<String> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read src/lib.rs");
    lib.lines()
        .filter_map(|line| line.trim().strip_prefix("pub mod "))
        .filter_map(|rest| rest.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// Each module's layer: its place in the order.
fn layers(order: &[String]) -> BTreeMap<String, usize> {
    order
        .iter()
        .enumerate()
        .map(|(index, name)| (name.clone(), index))
        .collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read src").flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    found.sort();
    found
}

/// `text` without its comments (line comments, doc comments, block
/// comments), strings kept as they are: a module named in prose is not a
/// use of it.
fn code_of(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    let mut block = 0usize;
    for line in text.lines() {
        let mut rest = line;
        let mut kept = String::new();
        loop {
            if block > 0 {
                match rest.find("*/") {
                    Some(end) => {
                        block -= 1;
                        rest = &rest[end + 2..];
                    }
                    None => break,
                }
            } else {
                let line_comment = rest.find("//");
                let block_start = rest.find("/*");
                match (line_comment, block_start) {
                    (Some(l), Some(b)) if b < l => {
                        kept.push_str(&rest[..b]);
                        block += 1;
                        rest = &rest[b + 2..];
                    }
                    (Some(l), _) => {
                        kept.push_str(&rest[..l]);
                        break;
                    }
                    (None, Some(b)) => {
                        kept.push_str(&rest[..b]);
                        block += 1;
                        rest = &rest[b + 2..];
                    }
                    (None, None) => {
                        kept.push_str(rest);
                        break;
                    }
                }
            }
        }
        code.push_str(&kept);
        code.push('\n');
    }
    code
}

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The top-level modules `code` names, with the line of each mention.
/// `depth` is how many `super::` climb from the file's module to the
/// crate root (a `super::` chain longer than that names a top-level
/// module).
fn named_modules(code: &str, depth: usize) -> Vec<(usize, String)> {
    let mut named = Vec::new();
    for (number, line) in code.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            if let Some(group) = after.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    named.push((number + 1, ident(item.trim()).to_string()));
                }
            } else {
                named.push((number + 1, ident(after).to_string()));
            }
            rest = after;
        }
        let mut rest = line;
        while let Some(at) = rest.find("super::") {
            let before = &rest[..at];
            let preceded = before
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
            let mut after = &rest[at..];
            let mut supers = 0;
            while let Some(next) = after.strip_prefix("super::") {
                supers += 1;
                after = next;
            }
            if !preceded && supers > depth {
                named.push((number + 1, ident(after).to_string()));
            }
            rest = after;
        }
    }
    named
}

/// A file's top-level module and how many `super::` reach the crate root
/// from it: `engine/run/batch.rs` is in `engine`, three levels down
/// (`batch` → `run` → `engine` → root); `engine/mod.rs` one.
fn module_of(src: &Path, file: &Path) -> Option<(String, usize)> {
    let relative = file.strip_prefix(src).ok()?;
    let parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let top = parts[0].trim_end_matches(".rs").to_string();
    if top == "lib" || top == "main" {
        return None;
    }
    let last = parts.last()?;
    let depth = if last == "mod.rs" {
        parts.len() - 1
    } else {
        parts.len()
    };
    Some((top, depth))
}

/// Every use of a later layer in `src`, as `file:line: module uses other`.
fn upward_uses(src: &Path) -> Vec<String> {
    let order = declared_order(src);
    let layers = layers(&order);
    let mut found = Vec::new();
    for file in sources(src) {
        let Some((module, depth)) = module_of(src, &file) else {
            continue;
        };
        let Some(&own) = layers.get(&module) else {
            found.push(format!("{}: not declared in src/lib.rs", file.display()));
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).expect("read a source"));
        for (line, used) in named_modules(&code, depth) {
            if layers.get(&used).is_some_and(|&layer| layer > own) {
                found.push(format!(
                    "{}:{line}: {module} uses {used}, declared after it",
                    file.display()
                ));
            }
        }
    }
    found
}

/// Each crate's source root and the modules its `lib.rs` must declare
/// first and last.
const CRATES: [(&str, &str, &str); 3] = [
    ("crates/core/src", "time_format", "stream"),
    ("crates/tui/src", "model", "tui"),
    ("src", "cli", "cli"),
];

#[test]
fn no_module_uses_one_declared_after_it() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for (dir, first, last) in CRATES {
        let src = root.join(dir);
        let order = declared_order(&src);
        assert_eq!(
            order.first().map(String::as_str),
            Some(first),
            "{dir}/lib.rs declares its lowest layer first: {order:?}"
        );
        assert_eq!(order.last().map(String::as_str), Some(last), "{order:?}");
        let upward = upward_uses(&src);
        assert!(
            upward.is_empty(),
            "imports against the order of {dir}/lib.rs:\n{}",
            upward.join("\n")
        );
    }
}

/// The checker sees what it must: grouped imports, paths in code, and
/// `super::` chains that leave the module; not comments.
#[test]
fn the_checker_finds_every_form_of_a_use_and_ignores_comments() {
    let code = code_of(
        "use crate::{disk, tui::App};\n\
         let x = crate::model::Model::default(); // crate::cli\n\
         /// [`crate::cli`]\n\
         use super::super::engine::Delta;\n\
         use super::fit;\n\
         /* crate::cli */ let y = 1;\n",
    );
    let named: Vec<String> = named_modules(&code, 1)
        .into_iter()
        .map(|(_, name)| name)
        .collect();
    assert_eq!(named, ["disk", "tui", "model", "engine"]);
}
