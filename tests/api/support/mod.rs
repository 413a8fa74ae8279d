//! Test support: spawning the app, fresh databases, users, logins, requests.

#![allow(dead_code, clippy::unwrap_used)] // not every test binary uses every helper

pub mod backend;
pub mod clamd;
pub mod documents;
pub mod jwt;
pub mod receiver;
#[path = "../../support/x12.rs"]
pub mod x12gen;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use claims::config::{Config, Settings};
use claims::server::Server;
use pipeline::store::Store;
use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::oneshot;

pub use backend::{Backend, Database};

/// Runs one async test body on both backends: `both_backends!(name, ...)` expands to
/// `sqlite::name` and `postgres::name`, each calling `name(Backend::…)`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await
                }
            )+
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await
                }
            )+
        }
    };
}

/// Like [`both_backends!`], plus `kafka::name` on the Kafka bus with PostgreSQL: for
/// the suites that exercise the pipeline.
#[macro_export]
macro_rules! all_backends {
    ($($name:ident),+ $(,)?) => {
        $crate::both_backends!($($name),+);
        mod kafka {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Kafka).await
                }
            )+
        }
    };
}

/// Runs an independent checker, a Python script of this repository (`script`, from its
/// root), over `files` written to `dir`; fails the test with what `checker` found.
pub fn check_with_python(script: &str, checker: &str, dir: &Path, files: &[(String, Vec<u8>)]) {
    let mut paths = Vec::new();
    for (name, bytes) in files {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        paths.push(p);
    }
    let out = std::process::Command::new(python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(&paths)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{checker} finds errors:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Python with the independent clients the tests use (`standardwebhooks`,
/// `confluent-kafka`), installed by `scripts/test`.
pub fn python() -> String {
    std::env::var("CLAIMS_PYTHON").unwrap_or_else(|_| {
        let venv = format!(
            "{}/.cache/claims/venv/bin/python",
            std::env::var("HOME").unwrap_or_default()
        );
        if std::path::Path::new(&venv).exists() {
            venv
        } else {
            "python3".into()
        }
    })
}

/// A running service and what a test needs to talk to it.
pub struct TestApp {
    pub addr: SocketAddr,
    pub base: String,
    pub client: reqwest::Client,
    pub store: Store,
    /// The service's shared state, for checks below the HTTP surface.
    pub state: api::AppState,
    pub config: Config,
    pub data_dir: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    running: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    // Kept last: dropped after the server stops using the database.
    _db: std::sync::Arc<Database>,
    _dir: std::sync::Arc<tempfile::TempDir>,
}

/// Options for spawning.
#[derive(Default)]
pub struct AppOptions {
    pub settings: Option<Settings>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, |_| {}).await
    }

    /// Spawns with settings adjusted by `tweak`.
    pub async fn spawn_with(backend: Backend, tweak: impl FnOnce(&mut Settings)) -> Self {
        let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
        let db = std::sync::Arc::new(Database::create(backend, dir.path()).await);
        if backend == Backend::Kafka {
            // Topics of their own, so that tests sharing the broker never meet.
            let prefix = format!("t{}.", uuid::Uuid::new_v4().simple());
            return Self::spawn_on(db, dir, move |s| {
                s.kafka_brokers = Some(backend::kafka_brokers());
                s.topic_prefix = prefix;
                s.partitions = 4;
                tweak(s)
            })
            .await;
        }
        Self::spawn_on(db, dir, tweak).await
    }

    /// A second process on the same database (and data folder), and on Kafka the same
    /// broker, topics and groups, as when scaling out or restarting.
    pub async fn spawn_sibling(&self, tweak: impl FnOnce(&mut Settings)) -> Self {
        self.spawn_sibling_running(None, tweak).await
    }

    /// [`TestApp::spawn_sibling`] running only `roles` (`api` and stage names), as
    /// `claims serve --stages` does; all of them when `None`.
    pub async fn spawn_sibling_running(
        &self,
        roles: Option<&[&str]>,
        tweak: impl FnOnce(&mut Settings),
    ) -> Self {
        let kafka = self.config.kafka.as_ref().map(|k| k.brokers.clone());
        let (prefix, partitions) = (self.config.topic_prefix.clone(), self.config.partitions);
        let roles = roles.map(|r| r.iter().map(|s| s.to_string()).collect());
        Self::spawn_running(self._db.clone(), self._dir.clone(), roles, move |s| {
            s.kafka_brokers = kafka;
            s.topic_prefix = prefix;
            s.partitions = partitions;
            tweak(s)
        })
        .await
    }

    async fn spawn_on(
        db: std::sync::Arc<Database>,
        dir: std::sync::Arc<tempfile::TempDir>,
        tweak: impl FnOnce(&mut Settings),
    ) -> Self {
        Self::spawn_running(db, dir, None, tweak).await
    }

    async fn spawn_running(
        db: std::sync::Arc<Database>,
        dir: std::sync::Arc<tempfile::TempDir>,
        roles: Option<Vec<String>>,
        tweak: impl FnOnce(&mut Settings),
    ) -> Self {
        // The service's logs, shown with a failing test (RUST_LOG to change the level).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let mut settings = Settings {
            data_dir: dir.path().to_owned(),
            http_addr: "127.0.0.1:0".into(),
            database_url: Some(db.url.clone()),
            database_max_connections: Some(4),
            ..Settings::default()
        };
        tweak(&mut settings);
        let config = Config::from_settings(settings).unwrap();
        let mut server = Server::build(&config).await.unwrap();
        if let Some(roles) = roles {
            server = server.with_roles(roles);
        }
        let addr = server.local_addr();
        let store = server.state().store.clone();
        let state = server.state().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let running = tokio::spawn(server.run_until(async move {
            let _ = rx.await;
        }));
        TestApp {
            addr,
            base: format!("http://{addr}/api/v1"),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            store,
            state,
            config,
            data_dir: dir.path().to_owned(),
            shutdown: Some(tx),
            running: Some(running),
            _db: db,
            _dir: dir,
        }
    }

    /// The records of `topic` once `n` are there, or after 20 s: on Kafka a command
    /// reaches its topic through the outbox moments after its 202. A little longer is
    /// allowed for any record beyond `n`, which would be a defect.
    pub async fn records_of(
        &self,
        topic: &pipeline::bus::TopicSpec,
        n: usize,
    ) -> Vec<pipeline::bus::Record> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let found = self.state.bus.scan(topic).await.unwrap();
            if found.len() >= n || std::time::Instant::now() > deadline {
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                return self.state.bus.scan(topic).await.unwrap();
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// Creates a tenant (if needed) and a user with these scopes; answers its email and
    /// password.
    pub async fn user(&self, tenant_id: &str, scopes: &str) -> (String, String) {
        self.store
            .ensure_tenant(tenant_id, tenant_id)
            .await
            .unwrap();
        let email = format!(
            "{}@{}.example.com",
            uuid::Uuid::new_v4().simple(),
            tenant_id
        );
        let password = "correct horse battery".to_owned();
        claims::admin::ensure_user(
            &self.store,
            tenant_id,
            &email,
            password.clone().into(),
            scopes,
        )
        .await
        .unwrap();
        (email, password)
    }

    pub async fn login_raw(&self, email: &str, password: &str) -> reqwest::Response {
        self.client
            .post(self.url("/auth/login"))
            .json(&json!({ "email": email, "password": password }))
            .send()
            .await
            .unwrap()
    }

    /// Logs in; answers the access token and the refresh token from the cookie.
    pub async fn login(&self, email: &str, password: &str) -> Session {
        let res = self.login_raw(email, password).await;
        assert_eq!(res.status(), StatusCode::OK);
        let refresh = refresh_cookie(res.headers()).expect("login sets the refresh cookie");
        let body: Value = res.json().await.unwrap();
        Session {
            access: body["access_token"].as_str().unwrap().to_owned(),
            refresh,
        }
    }

    /// A fresh user with these scopes, logged in.
    pub async fn session(&self, tenant_id: &str, scopes: &str) -> Session {
        let (email, password) = self.user(tenant_id, scopes).await;
        self.login(&email, &password).await
    }

    /// Sends a request with an optional bearer token and JSON body; answers the status,
    /// the headers and the body (JSON, or Null when empty).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Reply {
        let mut req = self.client.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        Reply::from(req.send().await.unwrap()).await
    }

    /// Sends a request with a bearer token, extra headers and a raw JSON body (so that
    /// a test knows the exact bytes sent).
    pub async fn call_with(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Reply {
        let mut req = self.client.request(method, self.url(path));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .body(b.to_vec());
        }
        Reply::from(req.send().await.unwrap()).await
    }

    /// Creates a rulebook with these rules and publishes it; answers its id.
    pub async fn publish_rulebook(&self, token: &str, rules: Value) -> String {
        let r = self
            .call(
                Method::POST,
                "/rulebooks",
                Some(token),
                Some(json!({"name": "Test rules", "rules": rules})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        let id = r.body["rulebook_id"].as_str().unwrap().to_owned();
        let p = self
            .call(
                Method::POST,
                &format!("/rulebooks/{id}/publish"),
                Some(token),
                None,
            )
            .await;
        assert_eq!(p.status, StatusCode::OK, "{}", p.body);
        id
    }

    /// Shuts the service down and waits until it has stopped, as a restart does.
    pub async fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(running) = self.running.take() {
            running.await.unwrap().unwrap();
        }
    }

    pub async fn get(&self, path: &str, token: &str) -> Reply {
        self.call(Method::GET, path, Some(token), None).await
    }

    /// The `kid`s the JWKS lists.
    pub async fn jwks_kids(&self) -> Vec<String> {
        let jwks: Value = self
            .client
            .get(self.url("/.well-known/jwks.json"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["kid"].as_str().unwrap().to_owned())
            .collect()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// An access token and the refresh token of one login.
#[derive(Debug, Clone)]
pub struct Session {
    pub access: String,
    pub refresh: String,
}

/// A response, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Reply {
    pub async fn from(res: reqwest::Response) -> Self {
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = res.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Asserts the spec's error body with this status and code, and that its
    /// `request_id` equals the `X-Request-Id` header; answers `error.field`.
    #[track_caller]
    pub fn assert_error(&self, status: StatusCode, code: &str) -> Option<String> {
        assert_eq!(self.status, status, "body: {}", self.body);
        let err = &self.body["error"];
        assert_eq!(err["code"], code, "body: {}", self.body);
        assert!(
            err["message"].as_str().is_some_and(|m| !m.is_empty()),
            "message missing: {}",
            self.body
        );
        let rid = self
            .header("x-request-id")
            .expect("every response has X-Request-Id");
        assert_eq!(err["request_id"], rid, "request_id must equal X-Request-Id");
        let keys: Vec<&str> = err
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // `details` only where contract part 2 puts a document in it (a 999 rejecting
        // an X12 interchange).
        let allowed = ["code", "message", "field", "request_id", "details"];
        assert!(
            keys.iter().all(|k| allowed.contains(k)),
            "unexpected members in {keys:?}"
        );
        assert!(
            err.get("details").is_none() || code == "BAD_REQUEST",
            "details only on a BAD_REQUEST: {}",
            self.body
        );
        err["field"].as_str().map(str::to_owned)
    }
}

/// The refresh token a response sets, if it sets one with a value.
pub fn refresh_cookie(headers: &HeaderMap) -> Option<String> {
    set_cookie(headers).and_then(|c| {
        let value = c
            .split(';')
            .next()?
            .strip_prefix("service_refresh_token=")?;
        (!value.is_empty()).then(|| value.to_owned())
    })
}

/// The `Set-Cookie` header of the refresh cookie.
pub fn set_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("service_refresh_token="))
        .map(str::to_owned)
}

/// Every scope of the spec.
pub const ALL_SCOPES: &str =
    "claims:write claims:read fraud:read uploads:write providers:write providers:read \
     rulebooks:write rulebooks:read workflow:manage audit:read tenant:configure";
