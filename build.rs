//! Names the commit the binary is built from, for `--version`, the man
//! page and `serve`'s `/healthz`: `LOCKTOP_COMMIT` is the commit's first
//! 12 hex digits, with `-dirty` when tracked files differ from it, or
//! `unknown commit` outside a git checkout (a crate tarball). The build
//! script runs again when the sources, the Cargo files or git's HEAD,
//! index or refs change: an edit elsewhere (a doc, a test) is seen as
//! dirty only from the next of those.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    // Any source change may make the tree dirty; a commit moves HEAD.
    for path in ["src", "crates", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={path}");
    }
    for dir in ["--git-dir", "--git-common-dir"]
        .iter()
        .filter_map(|flag| git(&["rev-parse", flag]))
    {
        let dir = PathBuf::from(dir);
        for file in ["HEAD", "index", "packed-refs", "refs"] {
            println!("cargo:rerun-if-changed={}", dir.join(file).display());
        }
    }
    let commit = match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|changes| !changes.is_empty());
            format!("{hash}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown commit".to_string(),
    };
    println!("cargo:rustc-env=LOCKTOP_COMMIT={commit}");
}
