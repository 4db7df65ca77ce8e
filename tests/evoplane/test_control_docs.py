"""The control API's /docs and /redoc work offline, and its OpenAPI says how to authorise."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from evoplane.control.app import create_control_app
from evoplane.control.config import ControlConfig
from registry import create_db_engine, upgrade

TOKEN = "evpadm_docs-test"


@pytest.fixture
async def control(tmp_path) -> AsyncIterator[httpx.AsyncClient]:
    """The app in process, without its lifespan: these routes never reach Temporal."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    app = create_control_app(ControlConfig(engine=engine, admin_token=TOKEN))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://control.test") as client:
        yield client
    engine.dispose()


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
async def test_the_docs_pages_load_everything_from_the_api_itself(control, page) -> None:
    html = (await control.get(page)).text
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources, html
    for source in sources:
        assert source.startswith("/"), f"{page} loads {source} from elsewhere"
        asset = await control.get(source)
        assert asset.status_code == 200 and len(asset.content) > 1000, source
    assert "http://" not in html and "https://" not in html
    assert "openapi.json" in html


async def test_the_openapi_document_has_a_bearer_scheme_tags_and_summaries(control) -> None:
    spec = (await control.get("/openapi.json")).json()
    (scheme,) = spec["components"]["securitySchemes"].values()
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    tags = {tag["name"] for tag in spec["tags"]}
    operations = [
        (path, method, operation)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
    ]
    assert len(operations) >= 17
    for path, method, operation in operations:
        where = f"{method.upper()} {path}"
        assert operation["security"] == [{"admin token": []}], where
        assert operation["tags"] and set(operation["tags"]) <= tags, where
        summary = operation["summary"]
        assert summary and "\n" not in summary and summary[0].isupper(), where
        assert not summary.endswith((",", ".")) and len(summary) < 120, where
    start = spec["paths"]["/api/evolutions"]["post"]["summary"]
    assert start == "Start an evolution of an agent: its id, run id and Temporal UI link"
    body = spec["components"]["schemas"]["StartEvolution"]
    assert body["examples"][0]["agent"] == "support-bot"


async def test_the_token_goes_as_the_scheme_says(control) -> None:
    assert (await control.get("/api/agents")).status_code == 401
    wrong = await control.get("/api/agents", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and "Bearer <admin token>" in wrong.json()["detail"]
    basic = await control.get("/api/agents", headers={"Authorization": f"Basic {TOKEN}"})
    assert basic.status_code == 401
    right = await control.get("/api/agents", headers={"Authorization": f"bearer {TOKEN}"})
    assert right.status_code == 200 and right.json() == []
