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
from hypothesis import strategies as st
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


# X12 bodies: a well-formed 837P (its provider unknown to the demo tenant, so each claim
# is refused on its own), the same cut at random points, and arbitrary text and bytes,
# all of which must be answered in the contract's terms.
_SAMPLE_837 = (
    "ISA*00*          *00*          *ZZ*SUBMITTER      *ZZ*CLAIMSSVC      *240101*1200*^*00501*000000001*0*P*:~\n"
    "GS*HC*SUBMITTER*CLAIMSSVC*20240101*1200*1*X*005010X222A1~\n"
    "ST*837*0001*005010X222A1~\n"
    "BHT*0019*00*REF1*20240101*1200*CH~\n"
    "NM1*41*2*SUBMITTER CO*****46*SUB01~\n"
    "PER*IC*EDI DESK*TE*5555551234~\n"
    "NM1*40*2*CLAIMS SERVICE*****46*CLAIMSSVC~\n"
    "HL*1**20*1~\n"
    "NM1*85*2*GOOD CLINIC*****XX*1234567893~\n"
    "N3*1 MAIN ST~\n"
    "N4*SPRINGFIELD*IL*627010000~\n"
    "REF*EI*123456789~\n"
    "HL*2*1*22*0~\n"
    "SBR*P*18*******CI~\n"
    "NM1*IL*1*DOE*JANE****MI*MBR-1~\n"
    "NM1*PR*2*CLAIMS SERVICE*****PI*CLAIMSSVC~\n"
    "CLM*FUZZ-1*150***11:B:1*Y*A*Y*Y~\n"
    "HI*ABK:Z00129~\n"
    "LX*1~\n"
    "SV1*HC:99213:25*150*UN*1***1~\n"
    "DTP*472*D8*20240101~\n"
    "SE*20*0001~\n"
    "GE*1*1~\n"
    "IEA*1*000000001~\n"
)

schemathesis.openapi.media_type(
    "application/edi-x12",
    st.one_of(
        st.just(_SAMPLE_837.encode()),
        st.integers(min_value=0, max_value=len(_SAMPLE_837)).map(lambda n: _SAMPLE_837[:n].encode()),
        st.text(max_size=300).map(str.encode),
        st.binary(max_size=300),
    ),
)
