//! A real `clamd` for a test: its own signature database in a temporary folder (the
//! EICAR hash and whatever else the test gives), listening on a free local port. It can
//! be stopped and started again on the same port, as an operator's restart would.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use md5::Digest;

/// The EICAR anti-virus test file.
pub const EICAR: &[u8] = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";

pub struct Clamd {
    pub address: String,
    config: PathBuf,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Clamd {
    /// A `clamd` that knows EICAR and each `(name, content)` given, by MD5 signature.
    pub fn start(signatures: &[(&str, &[u8])]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("db");
        std::fs::create_dir_all(&db).unwrap();
        let mut hdb = String::new();
        for (name, content) in [("Eicar-Test-Signature", EICAR)].iter().chain(signatures) {
            let md5 = hex::encode(md5(content));
            hdb.push_str(&format!("{md5}:{}:{name}\n", content.len()));
        }
        std::fs::write(db.join("tests.hdb"), hdb).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("clamd.conf");
        std::fs::write(
            &config,
            format!(
                "Foreground yes\nTCPSocket {port}\nTCPAddr 127.0.0.1\nDatabaseDirectory {}\n",
                db.display()
            ),
        )
        .unwrap();
        let mut clamd = Clamd {
            address: format!("tcp://127.0.0.1:{port}"),
            config,
            child: None,
            _dir: dir,
        };
        clamd.resume();
        clamd
    }

    /// Stops it; its port then refuses connections.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and waits until it answers.
    pub fn resume(&mut self) {
        let program = ["/usr/sbin/clamd", "/usr/local/sbin/clamd"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("clamd");
        let child = Command::new(program)
            .arg("-c")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start clamd (scripts/test installs it): {e}"));
        self.child = Some(child);
        let host = self.address.trim_start_matches("tcp://").to_owned();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ping(&host) {
            assert!(Instant::now() < deadline, "clamd did not start on {host}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Clamd {
    fn drop(&mut self) {
        self.stop();
    }
}

fn ping(host: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(host) else {
        return false;
    };
    let mut answer = [0u8; 5];
    s.write_all(b"zPING\0").is_ok() && s.read_exact(&mut answer).is_ok() && &answer == b"PONG\0"
}

fn md5(data: &[u8]) -> Vec<u8> {
    md5::Md5::digest(data).to_vec()
}
