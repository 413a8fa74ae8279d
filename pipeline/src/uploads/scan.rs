//! Asking `clamd` about a stored file: INSTREAM over TCP or its Unix socket, through
//! the `clamav-client` crate. An unreachable `clamd` is an I/O error for the caller to
//! retry; the file is never called clean without an answer.

use std::io;
use std::path::{Path, PathBuf};

/// Where `clamd` listens: `tcp://host:port` (or `host:port`) or `unix:///path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClamdAddress {
    Tcp(String),
    Socket(PathBuf),
}

impl ClamdAddress {
    pub fn parse(s: &str) -> Result<Self, String> {
        if let Some(path) = s.strip_prefix("unix://") {
            if path.starts_with('/') {
                return Ok(ClamdAddress::Socket(path.into()));
            }
            return Err(format!("`{s}`: a unix socket path must be absolute"));
        }
        let host = s.strip_prefix("tcp://").unwrap_or(s);
        match host.rsplit_once(':') {
            Some((h, port)) if !h.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(ClamdAddress::Tcp(host.to_owned()))
            }
            _ => Err(format!("`{s}` is neither tcp://host:port nor unix:///path")),
        }
    }
}

/// What `clamd` said of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanAnswer {
    Clean,
    Infected {
        signature: String,
    },
    /// `clamd` answered but could not scan it (e.g. over its size limit).
    Unscannable {
        reason: String,
    },
}

pub async fn scan_file(clamd: &ClamdAddress, path: &Path) -> io::Result<ScanAnswer> {
    use clamav_client::tokio as clam;
    let response = match clamd {
        ClamdAddress::Tcp(host) => {
            clam::scan_file(
                path,
                clam::Tcp {
                    host_address: host.as_str(),
                },
                None,
            )
            .await?
        }
        ClamdAddress::Socket(socket) => {
            clam::scan_file(
                path,
                clam::Socket {
                    socket_path: socket.as_path(),
                },
                None,
            )
            .await?
        }
    };
    Ok(parse(&response))
}

/// Reads `clamd`'s answer to INSTREAM: `stream: OK`, `stream: <name> FOUND`, or
/// `<reason> ERROR`.
pub fn parse(response: &[u8]) -> ScanAnswer {
    let text = String::from_utf8_lossy(response);
    let text = text.trim_end_matches(['\0', '\n', ' ']);
    let body = text.strip_prefix("stream: ").unwrap_or(text);
    if body == "OK" {
        ScanAnswer::Clean
    } else if let Some(signature) = body.strip_suffix(" FOUND") {
        ScanAnswer::Infected {
            signature: signature.to_owned(),
        }
    } else {
        ScanAnswer::Unscannable {
            reason: body.chars().take(200).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_clamds_answers() {
        assert_eq!(parse(b"stream: OK\0"), ScanAnswer::Clean);
        assert_eq!(
            parse(b"stream: Eicar-Test-Signature.UNOFFICIAL FOUND\0"),
            ScanAnswer::Infected {
                signature: "Eicar-Test-Signature.UNOFFICIAL".into()
            }
        );
        assert_eq!(
            parse(b"INSTREAM size limit exceeded. ERROR\0"),
            ScanAnswer::Unscannable {
                reason: "INSTREAM size limit exceeded. ERROR".into()
            }
        );
    }

    #[test]
    fn parses_addresses() {
        assert_eq!(
            ClamdAddress::parse("tcp://127.0.0.1:3310"),
            Ok(ClamdAddress::Tcp("127.0.0.1:3310".into()))
        );
        assert_eq!(
            ClamdAddress::parse("localhost:3310"),
            Ok(ClamdAddress::Tcp("localhost:3310".into()))
        );
        assert_eq!(
            ClamdAddress::parse("unix:///run/clamav/clamd.ctl"),
            Ok(ClamdAddress::Socket("/run/clamav/clamd.ctl".into()))
        );
        assert!(ClamdAddress::parse("clamd").is_err());
        assert!(ClamdAddress::parse("unix://relative").is_err());
    }
}
