//! Authentication (spec: Authentication; contract: Auth).
//!
//! - `keys`: the RSA key that signs access tokens, and the public keys that verify them.
//! - `token`: access-token claims, issuing and verifying.
//! - `password`: argon2id hashing, off the async threads.
//! - `refresh`: opaque refresh tokens and their cookie.
//! - `session_cache`: the short-lived memory of which sessions are still live.
//! - `verified`: the memory of access tokens whose signature was checked already.
//! - `principal`: the extractors that authenticate a request and check its scope.

pub mod keys;
pub mod password;
pub mod principal;
pub mod refresh;
pub mod session_cache;
pub mod token;
pub mod verified;

pub use principal::{Authorized, Principal};
