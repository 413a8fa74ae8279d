//! The check made while an upload streams in: its SHA-256 and size, the EICAR test
//! string anywhere in it, and its hash against a configured list of known-bad hashes.
//! It catches the obvious at once (422 before anything is kept); `clamd` in the scan
//! stage is the real scan.

use memchr::memmem;
use sha2::{Digest, Sha256};

/// The EICAR anti-virus test file's content.
pub const EICAR: &[u8] = b"X5O!P%@AP[4\\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*";
/// The name reported when EICAR is found, as ClamAV names it.
pub const EICAR_SIGNATURE: &str = "Eicar-Test-Signature";

/// Fed the upload chunk by chunk; holds only the last bytes of the previous chunk, so
/// a signature split across chunks is still found.
#[derive(Debug, Default)]
pub struct Screen {
    hasher: Sha256,
    size: u64,
    tail: Vec<u8>,
    eicar: bool,
}

/// What the screen found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screened {
    pub sha256: String,
    pub size: u64,
    /// The signature found, if any.
    pub signature: Option<String>,
}

impl Screen {
    pub fn feed(&mut self, chunk: &[u8]) {
        self.hasher.update(chunk);
        self.size += chunk.len() as u64;
        if self.eicar {
            return;
        }
        // A signature split across chunks lies in the kept tail and the chunk's start.
        let keep = EICAR.len() - 1;
        let mut seam = std::mem::take(&mut self.tail);
        seam.extend_from_slice(&chunk[..chunk.len().min(keep)]);
        self.eicar = memmem::find(&seam, EICAR).is_some() || memmem::find(chunk, EICAR).is_some();
        self.tail = if chunk.len() >= keep {
            chunk[chunk.len() - keep..].to_vec()
        } else {
            seam.split_off(seam.len().saturating_sub(keep))
        };
    }

    /// Ends the check; `known_bad` holds lowercase hex SHA-256 hashes.
    pub fn finish(self, known_bad: &[String]) -> Screened {
        let sha256 = hex::encode(self.hasher.finalize());
        let signature = if self.eicar {
            Some(EICAR_SIGNATURE.to_owned())
        } else if known_bad.iter().any(|h| h.eq_ignore_ascii_case(&sha256)) {
            Some(format!("Known-Bad-Hash.{}", &sha256[..16]))
        } else {
            None
        };
        Screened {
            sha256,
            size: self.size,
            signature,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_eicar_split_across_chunks_and_hashes_the_whole() {
        let mut data = b"%PDF-1.4 padding ".to_vec();
        data.extend_from_slice(EICAR);
        data.extend_from_slice(b" trailer");
        for split in [1, 7, 20, 40, data.len() - 1] {
            let mut s = Screen::default();
            for chunk in data.chunks(split) {
                s.feed(chunk);
            }
            let found = s.finish(&[]);
            assert_eq!(
                found.signature.as_deref(),
                Some(EICAR_SIGNATURE),
                "chunks of {split}"
            );
            assert_eq!(found.size, data.len() as u64);
            assert_eq!(found.sha256, hex::encode(Sha256::digest(&data)));
        }
    }

    #[test]
    fn a_clean_file_passes_and_a_known_bad_hash_does_not() {
        let mut s = Screen::default();
        s.feed(b"hello");
        let clean = s.finish(&[]);
        assert_eq!(clean.signature, None);
        let mut s = Screen::default();
        s.feed(b"hello");
        let bad = s.finish(&[clean.sha256.to_uppercase()]);
        assert!(bad.signature.unwrap().starts_with("Known-Bad-Hash."));
    }
}
