"""Schemathesis hooks for `scripts/fuzz-api`: how the fuzzer authenticates.

Every secured operation gets a bearer token of the demo user, who holds every scope.
The fuzzer is free to call any operation, so it may end its own session (logout), or
change the user's password or scopes (PATCH /tenant/users/{id}); a 401 then makes
Schemathesis fetch a new token, and when the user can no longer log in it is restored
with the operator CLI (`claims admin create-user` is idempotent and resets the
password and scopes). Logout always gets a throwaway session of its own, so that it
never ends the session the other operations use.
"""

import os
import subprocess

import requests
import schemathesis

BASE = os.environ["FUZZ_BASE_URL"]
EMAIL = os.environ["FUZZ_EMAIL"]
PASSWORD = os.environ["FUZZ_PASSWORD"]
TENANT = os.environ["FUZZ_TENANT"]
SCOPES = os.environ["FUZZ_SCOPES"]
CLAIMS = os.environ["FUZZ_CLAIMS_BIN"]


def _login() -> str:
    def attempt():
        return requests.post(
            f"{BASE}/auth/login", json={"email": EMAIL, "password": PASSWORD}, timeout=10
        )

    r = attempt()
    if r.status_code == 401:
        subprocess.run(
            [CLAIMS, "admin", "create-user", "--tenant-id", TENANT, "--email", EMAIL,
             "--password", PASSWORD, "--scopes", SCOPES],
            check=True, stdout=subprocess.DEVNULL,
        )
        r = attempt()
    r.raise_for_status()
    return r.json()["access_token"]


def _bearer(case, token):
    if case.headers is None:
        case.headers = {}
    case.headers["Authorization"] = f"Bearer {token}"


@schemathesis.auth(refresh_interval=120).skip_for(path="/auth/logout")
class DemoSession:
    def get(self, case, context):
        return _login()

    def set(self, case, data, context):
        _bearer(case, data)


@schemathesis.auth(refresh_interval=None).apply_to(path="/auth/logout")
class ThrowawaySession(DemoSession):
    """The same login, fresh for every logout (no caching)."""
