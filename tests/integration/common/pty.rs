//! Driving the real `locktop` binary in a real pseudo-terminal, reading the
//! screen the way a person would (a vt100 parser), with correctness
//! timeouts only.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

/// How long the screen may take to show something.
pub const SCREEN_TIMEOUT: Duration = Duration::from_secs(15);

/// How long the monitor may take to exit.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The first list row of `screen` that contains `name`, if any: below
/// the header and the tab bar (the header may name a key too), and left of
/// the details pane's border (its lines name the selected key).
pub fn row_of<'a>(screen: &'a str, name: &str) -> Option<&'a str> {
    let tab_bar = screen.lines().position(|line| line.contains(" 1 Tree "))?;
    screen
        .lines()
        .skip(tab_bar + 1)
        .map(|line| line.split('│').next().unwrap_or(line))
        .find(|line| line.contains(name))
}

struct Shared {
    parser: vt100::Parser,
    raw: Vec<u8>,
    eof: bool,
}

/// A `locktop` process on a pseudo-terminal.
pub struct Tui {
    child: Box<dyn portable_pty::Child + Send + Sync>,
    writer: Box<dyn Write + Send>,
    shared: Arc<Mutex<Shared>>,
    master: Box<dyn portable_pty::MasterPty + Send>,
    _reader: JoinHandle<()>,
}

impl Tui {
    /// Starts `locktop --state-dir STATE <args…>` on a `cols`×`rows` terminal.
    pub fn spawn(state_dir: &Path, args: &[&str], cols: u16, rows: u16) -> Self {
        Self::spawn_with_env(state_dir, args, cols, rows, &[])
    }

    /// Starts `locktop <args…>` with no `--state-dir`.
    pub fn spawn_plain(args: &[&str], cols: u16, rows: u16) -> Self {
        Self::start(None, args, cols, rows, &[])
    }

    /// Starts `<wrapper…> locktop --state-dir STATE <args…>` (e.g. under
    /// `strace`), on a `cols`×`rows` terminal.
    pub fn spawn_under(
        wrapper: &[&str],
        state_dir: &Path,
        args: &[&str],
        cols: u16,
        rows: u16,
    ) -> Self {
        let mut full: Vec<&str> = wrapper[1..].to_vec();
        full.push(super::locktop_bin());
        full.push("--state-dir");
        let state = state_dir.to_str().expect("a UTF-8 temp path");
        full.push(state);
        full.extend_from_slice(args);
        Self::start_program(wrapper[0], None, &full, cols, rows, &[])
    }

    /// [`Tui::spawn_plain`] with extra environment variables.
    pub fn spawn_plain_with_env(args: &[&str], cols: u16, rows: u16, env: &[(&str, &str)]) -> Self {
        Self::start(None, args, cols, rows, env)
    }

    /// [`Tui::spawn`] with extra environment variables.
    pub fn spawn_with_env(
        state_dir: &Path,
        args: &[&str],
        cols: u16,
        rows: u16,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start(Some(state_dir), args, cols, rows, env)
    }

    fn start(
        state_dir: Option<&Path>,
        args: &[&str],
        cols: u16,
        rows: u16,
        env: &[(&str, &str)],
    ) -> Self {
        Self::start_program(super::locktop_bin(), state_dir, args, cols, rows, env)
    }

    fn start_program(
        program: &str,
        state_dir: Option<&Path>,
        args: &[&str],
        cols: u16,
        rows: u16,
        env: &[(&str, &str)],
    ) -> Self {
        let pty = native_pty_system();
        let pair = pty
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("openpty");
        let mut command = CommandBuilder::new(program);
        if let Some(state_dir) = state_dir {
            command.arg("--state-dir");
            command.arg(state_dir);
        }
        command.args(args);
        command.env("TERM", "xterm-256color");
        // Hermetic: a `locktop serve` this host may run is never attached
        // to by default (a test that attaches names its socket in `env`).
        command.env("LOCKTOP_SOCKET", super::NO_SERVICE_SOCKET);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = pair.slave.spawn_command(command).expect("spawn locktop");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let shared = Arc::new(Mutex::new(Shared {
            parser: vt100::Parser::new(nonzero(rows), nonzero(cols), 0),
            raw: Vec::new(),
            eof: false,
        }));
        let sink = shared.clone();
        let reader_thread = std::thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            loop {
                match reader.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        let mut shared = sink.lock().unwrap();
                        shared.parser.process(&buffer[..n]);
                        shared.raw.extend_from_slice(&buffer[..n]);
                    }
                }
            }
            sink.lock().unwrap().eof = true;
        });
        Self {
            child,
            writer,
            shared,
            master: pair.master,
            _reader: reader_thread,
        }
    }

    /// The PID of the monitor.
    pub fn pid(&self) -> u32 {
        self.child.process_id().expect("child pid")
    }

    /// The screen's text now.
    pub fn screen(&self) -> String {
        self.shared.lock().unwrap().parser.screen().contents()
    }

    /// Everything the program wrote to the terminal so far.
    pub fn raw(&self) -> Vec<u8> {
        self.shared.lock().unwrap().raw.clone()
    }

    /// True while the program is on the alternate screen.
    pub fn on_alternate_screen(&self) -> bool {
        self.shared
            .lock()
            .unwrap()
            .parser
            .screen()
            .alternate_screen()
    }

    /// Types `keys` (raw bytes: `b"q"`, `b"\x1b[B"` for ↓ …).
    pub fn send(&mut self, keys: &[u8]) {
        self.writer.write_all(keys).expect("write to pty");
        self.writer.flush().expect("flush pty");
    }

    /// Resizes the terminal.
    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize pty");
        self.shared
            .lock()
            .unwrap()
            .parser
            .screen_mut()
            .set_size(nonzero(rows), nonzero(cols));
    }

    /// Waits until the screen satisfies `check`; panics with the last
    /// screen if it does not within [`SCREEN_TIMEOUT`].
    pub fn wait_for(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + SCREEN_TIMEOUT;
        loop {
            let screen = self.screen();
            if check(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen was:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits for the process to exit; its exit code (None on timeout).
    ///
    /// Also waits (within the same `timeout`) until the reader has read
    /// everything the program wrote: its exit can be seen before the last
    /// bytes it wrote (leaving the alternate screen, an error message) are
    /// read off the terminal, and [`Tui::raw`] and [`Tui::screen`] must
    /// show them. The reader sees EOF once no process has the terminal
    /// open any more.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<u32> {
        let deadline = Instant::now() + timeout;
        let code = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status.exit_code();
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(25));
        };
        while !self.shared.lock().unwrap().eof && Instant::now() <= deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        Some(code)
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn nonzero(value: u16) -> std::num::NonZeroU16 {
    std::num::NonZeroU16::new(value.max(1)).expect("at least 1")
}
