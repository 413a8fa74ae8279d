//! The backends: the embedded default (a SQLite file in the test's temporary folder, the
//! log in it), PostgreSQL (a fresh database created for the test and dropped after it),
//! and Kafka with PostgreSQL (the broker at `CLAIMS_TEST_KAFKA_BROKERS`, default
//! 127.0.0.1:9092, with topics named for the test). PostgreSQL is found through
//! `CLAIMS_TEST_POSTGRES_URL` (default: the local server, user postgres). When a server
//! is unreachable its tests fail rather than skip.

use std::path::Path;

use sqlx::{Connection, Executor};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    /// The Kafka bus, with PostgreSQL as the store.
    Kafka,
}

/// The broker the Kafka tests use.
pub fn kafka_brokers() -> String {
    std::env::var("CLAIMS_TEST_KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
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
            Backend::Postgres | Backend::Kafka => {
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
