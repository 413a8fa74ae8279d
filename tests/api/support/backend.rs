//! The two stores: a SQLite file in the test's temporary folder, or a fresh PostgreSQL
//! database created for the test and dropped after it. PostgreSQL is found through
//! `CLAIMS_TEST_POSTGRES_URL` (default: the local server, user postgres); when it is
//! unreachable the PostgreSQL tests fail rather than skip.

use std::path::Path;

use sqlx::{Connection, Executor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database that lives as long as the test.
pub struct Database {
    pub url: String,
    pg: Option<(String, String)>,
}

fn admin_url() -> String {
    std::env::var("CLAIMS_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
}

impl Database {
    pub async fn create(backend: Backend, dir: &Path) -> Self {
        match backend {
            Backend::Sqlite => Database {
                url: format!("sqlite://{}", dir.join("claims.db").display()),
                pg: None,
            },
            Backend::Postgres => {
                let admin = admin_url();
                let name = format!("claims_test_{}", uuid::Uuid::new_v4().simple());
                let mut conn = sqlx::PgConnection::connect(&admin)
                    .await
                    .unwrap_or_else(|e| {
                        panic!("PostgreSQL at {admin} is needed for the postgres tests: {e}")
                    });
                conn.execute(format!("CREATE DATABASE {name}").as_str())
                    .await
                    .unwrap();
                let _ = conn.close().await;
                let base = admin.rsplit_once('/').map(|(b, _)| b).unwrap_or(&admin);
                Database {
                    url: format!("{base}/{name}"),
                    pg: Some((admin, name)),
                }
            }
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let Some((admin, name)) = self.pg.take() else {
            return;
        };
        // Drop runs outside async context; a short-lived thread with its own runtime
        // removes the database so that test runs do not pile them up.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            rt.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&admin).await.ok()?;
                conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                    .await
                    .ok()?;
                conn.close().await.ok()
            })
        })
        .join();
    }
}
