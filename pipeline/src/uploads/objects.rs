//! Where uploaded files live: a directory on local disk by default. A file is received
//! into a staging name and renamed to its key only when complete and synced, so a key
//! never names a partial file and a crash leaves at worst an orphan in staging.

use std::io;
use std::path::{Path, PathBuf};

use tokio::io::AsyncWriteExt;

#[derive(Debug, Clone)]
pub struct ObjectStore {
    root: PathBuf,
}

/// A file being received; dropped without [`ObjectStore::commit`], it should be
/// [`ObjectStore::discard`]ed.
#[derive(Debug)]
pub struct Staged {
    pub path: PathBuf,
    pub file: tokio::fs::File,
}

impl ObjectStore {
    pub fn local(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// A new, empty staging file.
    pub async fn stage(&self) -> io::Result<Staged> {
        let dir = self.root.join(".staging");
        tokio::fs::create_dir_all(&dir).await?;
        let path = dir.join(uuid::Uuid::new_v4().simple().to_string());
        let file = tokio::fs::File::create(&path).await?;
        Ok(Staged { path, file })
    }

    /// Makes the staged file durable under `key`.
    pub async fn commit(&self, mut staged: Staged, key: &str) -> io::Result<()> {
        staged.file.flush().await?;
        staged.file.sync_all().await?;
        drop(staged.file);
        let target = self.path(key)?;
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::rename(&staged.path, &target).await?;
        if let Some(parent) = target.parent() {
            // The rename is durable once the directory is synced.
            tokio::fs::File::open(parent).await?.sync_all().await?;
        }
        Ok(())
    }

    pub async fn discard(&self, staged: Staged) {
        drop(staged.file);
        if let Err(e) = tokio::fs::remove_file(&staged.path).await {
            tracing::warn!(path = %staged.path.display(), error = %e, "A staged upload could not be removed.");
        }
    }

    /// The file of `key`, for readers on this machine (`clamd`, Tesseract).
    pub fn path(&self, key: &str) -> io::Result<PathBuf> {
        let safe = !key.is_empty()
            && key.split('/').all(|part| {
                !part.is_empty()
                    && part != "."
                    && part != ".."
                    && part
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            });
        if !safe {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{key}` is not an object key"),
            ));
        }
        Ok(self.root.join(key))
    }

    pub async fn delete(&self, key: &str) -> io::Result<()> {
        match tokio::fs::remove_file(self.path(key)?).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}
