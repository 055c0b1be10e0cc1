"""A bounded schemathesis pass over the OpenAPI schema: no input makes the API answer
5xx, and every answer (errors included) matches the schema the API publishes."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from nasctl.store import Store
from nasctl.web import create_app
from tests.helpers.synthetic import add_synthetic
from tests.web.conftest import TOKEN


def _app(tmp: Path):  # type: ignore[no-untyped-def]
    store = Store(f"sqlite:///{tmp / 'fuzz.db'}", create=True)
    add_synthetic(store, "fuzz", 15)
    add_synthetic(store, "open", 3, finish=False, seed=1)
    return create_app(store, token=TOKEN)


_DIR = Path(__import__("tempfile").mkdtemp(prefix="nasctl-fuzz-"))
schema = schemathesis.openapi.from_asgi("/openapi.json", _app(_DIR))


@pytest.mark.filterwarnings("ignore")
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_no_server_errors(case: schemathesis.Case) -> None:
    if case.path_parameters and "name" in case.path_parameters:
        # about half the cases aim at experiments that exist, so handlers past the lookup are exercised too
        if len(str(case.path_parameters["name"])) % 2 == 0:
            case.path_parameters["name"] = "fuzz" if len(str(case.path_parameters)) % 3 else "open"
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {TOKEN}"}
    # the diagnostics endpoint fits a model (and imports Ax) on its first call: allow for a loaded machine
    case.call_and_validate(
        checks=[not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance],
        timeout=180,
    )
