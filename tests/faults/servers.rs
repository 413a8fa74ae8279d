//! Servers the fault tests own, so that restarting one disturbs no other test: a
//! PostgreSQL cluster of its own (Debian's binaries, `initdb` in a temporary folder, on
//! a free port), a nisshi broker of its own (the one `scripts/lib/deps.sh` builds), and
//! a small tmpfs to fill.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::service::free_port;

fn is_root() -> bool {
    // `id -u` rather than libc: the test crate has no FFI of its own.
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// Runs a PostgreSQL binary as the `postgres` user when the test runs as root
/// (PostgreSQL refuses to run as root), as the current user otherwise.
fn pg(bin: &Path, args: &[&str]) -> Command {
    let mut c = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    c.args(args);
    c
}

/// Runs `c` to its end; a failure panics with its output and `context()`.
fn run(mut c: Command, context: impl FnOnce() -> String) {
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}: {}{}",
        context(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn pg_bin_dir() -> PathBuf {
    let root = Path::new("/usr/lib/postgresql");
    let mut versions: Vec<u32> = std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("PostgreSQL's binaries are needed under {root:?}: {e}"))
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    versions.sort();
    root.join(versions.last().expect("a PostgreSQL version").to_string())
        .join("bin")
}

/// A PostgreSQL cluster of the test's own, with trust authentication on loopback.
pub struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    _dir: tempfile::TempDir,
    pub port: u16,
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("pg");
        std::fs::create_dir(&data).unwrap();
        if is_root() {
            for p in [dir.path(), &data] {
                let ok = Command::new("chown")
                    .args(["postgres:postgres"])
                    .arg(p)
                    .status()
                    .unwrap();
                assert!(ok.success());
            }
        }
        let bin = pg_bin_dir();
        let data_s = data.display().to_string();
        run(
            pg(
                &bin.join("initdb"),
                &["-D", &data_s, "-U", "postgres", "--auth=trust", "-N"],
            ),
            || "initdb".into(),
        );
        let pg = Postgres {
            bin,
            data,
            _dir: dir,
            port: free_port(),
        };
        pg.up();
        pg
    }

    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on",
            self.port,
            self.data.display()
        );
        let data = self.data.display().to_string();
        let log = self.data.join("server.log").display().to_string();
        run(
            pg(
                &self.bin.join("pg_ctl"),
                &[
                    "-D", &data, "-o", &opts, "-l", &log, "-w", "-t", "60", "start",
                ],
            ),
            || {
                let server = std::fs::read_to_string(&log).unwrap_or_default();
                format!("pg_ctl start (server log: {server})")
            },
        );
    }

    /// Stops the server the way a crash does (`-m immediate`: no checkpoint, every
    /// backend gone at once), so that only what was flushed at commit survives.
    pub fn crash(&self) {
        let data = self.data.display().to_string();
        run(
            pg(
                &self.bin.join("pg_ctl"),
                &["-D", &data, "-m", "immediate", "-w", "stop"],
            ),
            || "pg_ctl stop".into(),
        );
    }

    pub fn restart_after_crash(&self, down: Duration) {
        self.crash();
        std::thread::sleep(down);
        self.up();
    }

    pub async fn create_database(&self, name: &str) {
        use sqlx::{Connection, Executor};
        let mut conn = sqlx::PgConnection::connect(&self.admin_url())
            .await
            .unwrap();
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await
            .unwrap();
        let _ = conn.close().await;
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = pg(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "stop"],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    }
}

/// A nisshi broker of the test's own on a free port, its log in a temporary folder.
pub struct Broker {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub addr: String,
    child: Option<Child>,
}

impl Broker {
    pub fn start() -> Broker {
        let bin = std::env::var_os("CLAIMS_TEST_NISSHI")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                let home = std::env::var_os("HOME").expect("HOME");
                Path::new(&home).join(".cache/claims/nisshi/bin/nisshi")
            });
        assert!(
            bin.exists(),
            "the nisshi broker is needed at {bin:?} (scripts/lib/deps.sh builds it; \
             CLAIMS_TEST_NISSHI names another)"
        );
        let mut b = Broker {
            bin,
            dir: tempfile::tempdir().unwrap(),
            addr: format!("127.0.0.1:{}", free_port()),
            child: None,
        };
        b.up();
        b
    }

    fn up(&mut self) {
        let url = format!("tcp://{}", self.addr);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("broker.log"))
            .unwrap();
        let storage = format!("sqlite:///{}/broker.db", self.dir.path().display());
        let child = Command::new(&self.bin)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .args(["--storage-engine", &storage])
            .args(["--group-initial-rebalance-delay", "0s"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(&self.addr).is_err() {
            assert!(Instant::now() < deadline, "the broker did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGKILLs the broker and starts it again on the same port and storage after
    /// `down`.
    pub fn restart(&mut self, down: Duration) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        std::thread::sleep(down);
        self.up();
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A tmpfs of `size` mounted over a fresh folder, unmounted when dropped. Mounting
/// needs root (or `sudo -n`).
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

fn privileged(args: &[&str]) -> Command {
    let mut c = if is_root() {
        Command::new(args[0])
    } else {
        let mut c = Command::new("sudo");
        c.arg("-n").arg(args[0]);
        c
    };
    c.args(&args[1..]);
    c
}

impl SmallDisk {
    pub fn mount(size: &str) -> SmallDisk {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().display().to_string();
        let opts = format!("size={size},mode=0777");
        run(
            privileged(&["mount", "-t", "tmpfs", "-o", &opts, "tmpfs", &path]),
            || "mounting a tmpfs needs root or sudo".into(),
        );
        SmallDisk { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Fills what is left with a ballast file; answers its path.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let ballast = self.path().join("ballast");
        let mut f = std::fs::File::create(&ballast).unwrap();
        let chunk = vec![0x5a_u8; 64 * 1024];
        loop {
            if f.write_all(&chunk).is_err() {
                break;
            }
        }
        // What is left is smaller than a chunk: take it a page at a time.
        while f.write_all(&chunk[..4096]).is_ok() {}
        while f.write_all(&chunk[..1]).is_ok() {}
        ballast
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let path = self.dir.path().display().to_string();
        let _ = privileged(&["umount", "-l", &path]).status();
    }
}
