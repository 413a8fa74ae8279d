//! Access-token keys (contract: Running, Auth).
//!
//! Each process signs with the RSA key in `CLAIMS_JWT_KEY_FILE` (PKCS#8 PEM), generated
//! on first start when missing; its `kid` is the RFC 7638 thumbprint of the public key.
//! Each process registers its public key in the store, and verifies with any registered
//! key, so processes with different key files (or a rotated key) accept each other's
//! tokens and the JWKS lists them all. Keys are parsed once and kept in memory; an
//! unknown `kid` triggers at most one reload from the store per second, and the keys
//! are read again every [`KEY_REFRESH_EVERY`] so that a key an operator retired
//! (`claims admin retire-key`) stops verifying within that time.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use jsonwebtoken::{DecodingKey, EncodingKey};
use pipeline::clock::now_ms;
use pipeline::store::{Store, StoreError};
use rsa::pkcs8::{DecodePrivateKey, EncodePrivateKey, LineEnding};
use rsa::traits::PublicKeyParts;
use rsa::RsaPrivateKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::verified::VerifiedTokens;

pub const ALGORITHM: &str = "RS256";
const RSA_BITS: usize = 2048;

/// How often a running service reads the keys in service again: the longest a retired
/// key's tokens are still taken.
pub const KEY_REFRESH_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read or write the key file {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the key file {0} is not an RSA private key in PKCS#8 PEM")]
    Format(String),
    #[error("key generation failed: {0}")]
    Generate(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A public key in RFC 7517 form, as the JWKS serves it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Jwk {
    pub kty: String,
    #[serde(rename = "use")]
    pub use_: String,
    pub alg: String,
    pub kid: String,
    pub n: String,
    pub e: String,
}

/// The signing key of this process and every key that verifies tokens.
pub struct KeyRing {
    signer: RwLock<Arc<Signer>>,
    /// Where this process keeps its private key.
    key_file: PathBuf,
    refreshing: tokio::sync::Mutex<()>,
    store: Store,
    verifying: RwLock<HashMap<String, Arc<DecodingKey>>>,
    last_reload_ms: AtomicI64,
    /// Tokens these keys verified; forgotten when a reload finds a key taken out of
    /// service.
    verified: VerifiedTokens,
}

/// The key this process signs new tokens with.
pub struct Signer {
    pub kid: String,
    pub encoding: EncodingKey,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRing")
            .field("signer", &self.signer())
            .finish_non_exhaustive()
    }
}

impl KeyRing {
    /// Loads the private key from `path` (creating it when missing), registers its
    /// public half in the store and loads every registered key. A key an operator
    /// retired is replaced by a new one (see [`KeyRing::refresh`]).
    pub async fn open(path: &Path, store: Store) -> Result<Self, KeyError> {
        let key_file = path.to_owned();
        let path = key_file.clone();
        let private = tokio::task::spawn_blocking(move || load_or_generate(&path))
            .await
            .map_err(|e| KeyError::Generate(e.to_string()))??;
        let ring = Self {
            signer: RwLock::new(Arc::new(register(&private, &store).await?)),
            key_file,
            refreshing: tokio::sync::Mutex::new(()),
            store,
            verifying: RwLock::new(HashMap::new()),
            last_reload_ms: AtomicI64::new(0),
            verified: VerifiedTokens::default(),
        };
        ring.refresh().await?;
        Ok(ring)
    }

    /// The key new tokens are signed with.
    pub fn signer(&self) -> Arc<Signer> {
        self.signer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The tokens these keys verified already.
    pub fn verified(&self) -> &VerifiedTokens {
        &self.verified
    }

    /// The key that verifies tokens with this `kid`, if any process registered one.
    pub async fn decoding_key(&self, kid: &str) -> Option<Arc<DecodingKey>> {
        if let Some(k) = self.cached(kid) {
            return Some(k);
        }
        let now = now_ms();
        let last = self.last_reload_ms.load(Ordering::Relaxed);
        if now - last >= 1000
            && self
                .last_reload_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "Could not reload signing keys.");
            }
        }
        self.cached(kid)
    }

    fn cached(&self, kid: &str) -> Option<Arc<DecodingKey>> {
        self.verifying
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(kid)
            .cloned()
    }

    /// Reads the keys in service again, so that a key an operator retired stops
    /// verifying (and its tokens verified before are forgotten). When the retired key
    /// is this process's own, the process makes a new one, keeps it in its key file in
    /// place of the old, registers it and signs with it from then on: the tokens it
    /// signs must verify everywhere. Runs every [`KEY_REFRESH_EVERY`] while the
    /// service runs, and with an unknown `kid` (at most once a second).
    pub async fn refresh(&self) -> Result<(), KeyError> {
        // One refresh at a time: two that both found the key retired would each make
        // a new one, and the key file could end up holding the other's.
        let _one = self.refreshing.lock().await;
        self.reload().await?;
        let own = self.signer().kid.clone();
        if self.cached(&own).is_some() {
            return Ok(());
        }
        let path = self.key_file.clone();
        let private = tokio::task::spawn_blocking(move || replace_key_file(&path))
            .await
            .map_err(|e| KeyError::Generate(e.to_string()))??;
        let signer = register(&private, &self.store).await?;
        tracing::warn!(retired = %own, kid = %signer.kid, path = %self.key_file.display(),
            "This process's access-token signing key was retired; signing with a new key from now on.");
        *self.signer.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(signer);
        self.reload().await
    }

    /// [`KeyRing::refresh`] every [`KEY_REFRESH_EVERY`] until `stop`.
    pub async fn keep_fresh(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let mut every = tokio::time::interval(KEY_REFRESH_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = every.tick() => {}
                _ = stop.wait_for(|s| *s) => return,
            }
            if let Err(e) = self.refresh().await {
                tracing::warn!(error = %e, "Could not reload signing keys.");
            }
        }
    }

    async fn reload(&self) -> Result<(), KeyError> {
        let mut map = HashMap::new();
        for record in self.store.active_signing_keys().await? {
            let Ok(jwk) = serde_json::from_str::<Jwk>(&record.public_jwk) else {
                tracing::warn!(kid = %record.kid, "Skipping an unreadable signing key.");
                continue;
            };
            if let Ok(key) = DecodingKey::from_rsa_components(&jwk.n, &jwk.e) {
                map.insert(jwk.kid, Arc::new(key));
            }
        }
        let mut verifying = self.verifying.write().unwrap_or_else(|p| p.into_inner());
        // Tokens verified before stay verified unless their key may be gone: a reload
        // comes with any unknown `kid` (at most once a second), and clearing on each
        // would let anyone send every client's next request through RS256 again.
        let gone = verifying.keys().any(|kid| !map.contains_key(kid));
        *verifying = map;
        drop(verifying);
        if gone {
            self.verified.clear();
        }
        Ok(())
    }

    /// Every public key that verifies tokens, for the JWKS endpoint.
    pub async fn jwks(&self) -> Result<Vec<Jwk>, KeyError> {
        Ok(self
            .store
            .active_signing_keys()
            .await?
            .into_iter()
            .filter_map(|r| serde_json::from_str(&r.public_jwk).ok())
            .collect())
    }
}

/// Registers the public half of `private` in the store; answers the signer it makes.
async fn register(private: &RsaPrivateKey, store: &Store) -> Result<Signer, KeyError> {
    let jwk = public_jwk(private);
    let pem = private
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| KeyError::Generate(e.to_string()))?;
    let encoding = EncodingKey::from_rsa_pem(pem.as_bytes())
        .map_err(|_| KeyError::Format("<memory>".into()))?;
    let jwk_json = serde_json::to_string(&jwk).map_err(|e| KeyError::Generate(e.to_string()))?;
    store
        .register_signing_key(&jwk.kid, ALGORITHM, &jwk_json)
        .await?;
    Ok(Signer {
        kid: jwk.kid,
        encoding,
    })
}

/// The public half of `key` as a JWK whose `kid` is its RFC 7638 thumbprint.
pub fn public_jwk(key: &RsaPrivateKey) -> Jwk {
    let n = URL_SAFE_NO_PAD.encode(key.n().to_bytes_be());
    let e = URL_SAFE_NO_PAD.encode(key.e().to_bytes_be());
    Jwk {
        kid: thumbprint(&n, &e),
        kty: "RSA".into(),
        use_: "sig".into(),
        alg: ALGORITHM.into(),
        n,
        e,
    }
}

/// RFC 7638: SHA-256 over the required members in lexicographic order, no spaces.
pub fn thumbprint(n: &str, e: &str) -> String {
    let canonical = format!(r#"{{"e":"{e}","kty":"RSA","n":"{n}"}}"#);
    URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
}

/// Reads the PEM at `path`, or generates a key and writes it there. Two processes
/// starting at once both end up with the one key that won the race: the new file is
/// written aside and hard-linked into place, which fails if the name exists.
fn load_or_generate(path: &Path) -> Result<RsaPrivateKey, KeyError> {
    let io = |source| KeyError::Io {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(path) {
        Ok(pem) => return parse_pem(&pem, path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let (key, tmp) = generate_aside(path)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            tracing::info!(path = %path.display(), "Generated a new access-token signing key.");
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let pem = std::fs::read_to_string(path).map_err(io)?;
            parse_pem(&pem, path)
        }
        Err(e) => Err(io(e)),
    }
}

/// Generates a key and puts it at `path` in place of the one there: written aside,
/// then renamed over it, so the file always holds one whole key.
fn replace_key_file(path: &Path) -> Result<RsaPrivateKey, KeyError> {
    let (key, tmp) = generate_aside(path)?;
    std::fs::rename(&tmp, path).map_err(|source| KeyError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(key)
}

/// A new key, written to a file of this process's own beside `path` (answered with it),
/// for the caller to move into place.
fn generate_aside(path: &Path) -> Result<(RsaPrivateKey, PathBuf), KeyError> {
    let key = RsaPrivateKey::new(&mut rand::rngs::OsRng, RSA_BITS)
        .map_err(|e| KeyError::Generate(e.to_string()))?;
    let pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| KeyError::Generate(e.to_string()))?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    // Left by an earlier process of the same id that stopped half-way.
    let _ = std::fs::remove_file(&tmp);
    write_private(&tmp, pem.as_bytes()).map_err(|source| KeyError::Io {
        path: tmp.display().to_string(),
        source,
    })?;
    Ok((key, tmp))
}

fn parse_pem(pem: &str, path: &Path) -> Result<RsaPrivateKey, KeyError> {
    RsaPrivateKey::from_pkcs8_pem(pem).map_err(|_| KeyError::Format(path.display().to_string()))
}

/// Writes a file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thumbprint_matches_rfc_7638_example() {
        // The example key of RFC 7638, section 3.1.
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        assert_eq!(
            thumbprint(n, "AQAB"),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    /// The key file is readable by its owner only.
    fn assert_owner_only(path: &Path) {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn generates_once_then_reuses_the_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/signing.pem");
        let a = load_or_generate(&path).unwrap();
        let b = load_or_generate(&path).unwrap();
        assert_eq!(public_jwk(&a), public_jwk(&b));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_owner_only(&path);
    }

    #[test]
    fn a_replaced_key_file_holds_the_new_key_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/signing.pem");
        let old = load_or_generate(&path).unwrap();
        let new = replace_key_file(&path).unwrap();
        assert_ne!(public_jwk(&old).kid, public_jwk(&new).kid);
        let kept = load_or_generate(&path).unwrap();
        assert_eq!(public_jwk(&kept), public_jwk(&new));
        let names: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["signing.pem"], "nothing is left aside");
        assert_owner_only(&path);
    }

    #[test]
    fn refuses_a_file_that_is_not_a_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("signing.pem");
        std::fs::write(&path, "not a key").unwrap();
        assert!(matches!(load_or_generate(&path), Err(KeyError::Format(_))));
    }
}
