//! The `locktop` binary: parse the command line, run, map the outcome to
//! an exit code. Every error is one line on stderr; nothing panics on bad
//! input.

use std::process::ExitCode;

fn main() -> ExitCode {
    locktop::cli::main()
}
