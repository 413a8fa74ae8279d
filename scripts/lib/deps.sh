# Sourced by the scripts: installs and starts what building and testing need, on a
# fresh Debian 12 machine or on one that already has it all (then it does nothing).
# shellcheck shell=bash

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

log() { printf '==> %s\n' "$*" >&2; }

apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "Installing ${missing[*]}"
  if [ -z "${APT_UPDATED:-}" ]; then
    $SUDO apt-get update -qq
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# A C compiler and friends for the crates that build C (SQLite, ring).
ensure_build_tools() {
  apt_install ca-certificates curl gcc libc6-dev make pkg-config
}

# The Rust toolchain, through rustup when cargo is missing.
ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
  if ! command -v cargo >/dev/null 2>&1; then
    log "Installing the Rust toolchain with rustup"
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c clippy -c rustfmt
    export PATH="$HOME/.cargo/bin:$PATH"
  fi
}

# PostgreSQL on 127.0.0.1:5432 for the postgres half of the suite: uses a running
# server, starts an installed cluster, or installs one. Exports
# CLAIMS_TEST_POSTGRES_URL for the tests.
ensure_postgres() {
  apt_install postgresql postgresql-client
  if ! pg_isready -q -h 127.0.0.1 -p 5432; then
    local version
    version=$(ls /etc/postgresql | sort -n | tail -1)
    log "Starting PostgreSQL $version"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || $SUDO pg_ctlcluster "$version" main start
    for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
  fi
  local url="${CLAIMS_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
  if ! psql "$url" -qtAc 'select 1' >/dev/null 2>&1; then
    # A fresh Debian cluster wants a password over TCP: give the postgres role one.
    log "Setting a password for the postgres role (local test server only)"
    $SUDO runuser -u postgres -- psql -qc "ALTER USER postgres PASSWORD 'postgres'" >/dev/null
    url="postgres://postgres:postgres@127.0.0.1:5432/postgres"
    psql "$url" -qtAc 'select 1' >/dev/null
  fi
  export CLAIMS_TEST_POSTGRES_URL="$url"
  # Databases left by an interrupted earlier run.
  psql "$url" -qtAc "select datname from pg_database where datname like 'claims_test_%'" |
    while read -r db; do [ -n "$db" ] && psql "$url" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null; done
  return 0
}

# A Python virtual environment with the packages the tests use as independent clients
# (schemathesis fuzzes the API against its OpenAPI document: scripts/fuzz-api).
# The last five are what confluent-kafka's schema registry client imports; they are named
# here rather than through its `schemaregistry` extra, which asks for a certifi newer
# than the package index holds.
ensure_python_tools() {
  apt_install python3 python3-venv
  local venv="${CLAIMS_PY_VENV:-$HOME/.cache/claims/venv}"
  if [ ! -x "$venv/bin/python" ]; then
    log "Creating a Python environment at $venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check "pyjwt[crypto]==2.10.1" "standardwebhooks==1.1.0" \
    "confluent-kafka==2.16.1" "fastavro==1.13.1" \
    "attrs==26.1.0" "cachetools==8.0.1" "certifi==2026.10.18" "httpx2==2.16.2" "authlib==1.9.9" \
    "schemathesis==4.32.5" "pyx12==4.0.0" "fhir.resources==8.3.0"
  export CLAIMS_PYTHON="$venv/bin/python"
}

# The console's browser tests: Debian's Chromium, driven by Playwright for Python
# through its executable_path (Playwright's own browser downloads are not used).
ensure_browser() {
  apt_install chromium chromium-driver fonts-dejavu-core
  [ -n "${CLAIMS_PYTHON:-}" ] || ensure_python_tools
  "$CLAIMS_PYTHON" -m pip install -q --disable-pip-version-check "playwright==1.65.2"
}

# What uploads are processed with: ClamAV's clamd (the tests start their own, with a
# signature database they write), Tesseract with English, poppler's PDF tools, and
# util-linux's prlimit, which bounds each OCR tool's memory.
ensure_upload_tools() {
  apt_install clamav-daemon tesseract-ocr tesseract-ocr-eng poppler-utils util-linux
}

# A Kafka-protocol broker on 127.0.0.1:9092 for the kafka half of the suite: no Apache
# Kafka or Redpanda package reaches Debian 12 without Docker, so the tests use nisshi, a
# Kafka-compatible broker from crates.io, built once and cached (about half an hour cold on 2 cores).
# It keeps its log in SQLite under a fresh folder each start. Exports
# CLAIMS_TEST_KAFKA_BROKERS for the tests. A broker it starts is stopped by
# stop_kafka_broker (below), which the scripts that call it run on their way out.
CLAIMS_BROKER_PID=""
CLAIMS_BROKER_DIR=""
ensure_kafka_broker() {
  local addr="${CLAIMS_TEST_KAFKA_BROKERS:-127.0.0.1:9092}"
  export CLAIMS_TEST_KAFKA_BROKERS="$addr"
  local host="${addr%:*}" port="${addr##*:}"
  if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
    return 0
  fi
  local root="$HOME/.cache/claims/nisshi"
  if [ ! -x "$root/bin/nisshi" ]; then
    log "Building the nisshi broker (once; cached under $root)"
    cargo install nisshi --version 0.8.1 --locked --ignore-rust-version --root "$root" --quiet
  fi
  local dir
  dir=$(mktemp -d "${TMPDIR:-/tmp}/claims-broker.XXXXXX")
  log "Starting nisshi on $addr (data in $dir)"
  nohup "$root/bin/nisshi" broker \
    --listener-url "tcp://$addr" --advertised-listener-url "tcp://$addr" \
    --storage-engine "sqlite:///$dir/broker.db" --group-initial-rebalance-delay 0s \
    >"$dir/broker.log" 2>&1 &
  CLAIMS_BROKER_PID=$!
  CLAIMS_BROKER_DIR=$dir
  for _ in $(seq 1 60); do
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
    sleep 0.5
  done
  log "nisshi did not start; its log:"
  cat "$dir/broker.log" >&2
  return 1
}

# Stops the broker that ensure_kafka_broker started in this shell, if it started one,
# and deletes its data. Left running after a Kafka load (`BENCH_BACKEND=kafka
# scripts/bench`), nisshi went on reading its storage with no client connected, a whole
# core of the two, and slowed whatever ran next on the machine: the benchmarks, whose
# figures then followed the broker.
stop_kafka_broker() {
  [ -n "$CLAIMS_BROKER_PID" ] || return 0
  kill "$CLAIMS_BROKER_PID" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 "$CLAIMS_BROKER_PID" 2>/dev/null || break
    sleep 0.2
  done
  kill -9 "$CLAIMS_BROKER_PID" 2>/dev/null || true
  rm -rf "$CLAIMS_BROKER_DIR"
  CLAIMS_BROKER_PID=""
  CLAIMS_BROKER_DIR=""
}
