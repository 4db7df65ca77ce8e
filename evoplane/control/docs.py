"""The control API's /docs (Swagger UI) and /redoc, served from files installed with it.

FastAPI's own pages load their scripts from a CDN, which leaves them blank offline; the
fastapi-offline package ships the same Swagger UI and ReDoc builds, served here from
/docs-assets. The pages and the OpenAPI document need no token; "Authorize" takes it.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter, FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS", "TAGS", "serve_docs", "summarise"]

ASSETS = "/docs-assets"

TAGS = [
    {
        "name": "evolutions",
        "description": (
            "Start an evolution, follow it, approve, reject or abort it, answer its "
            "inconclusive canary."
        ),
    },
    {"name": "agents", "description": "Agents, their versions (read, diff), settings, rollback."},
    {"name": "schedules", "description": "Evolve an agent every so often."},
    {"name": "tenants", "description": "A tenant's data policy and who changed it."},
    {
        "name": "review",
        "description": "What needs a person: unsure corrections, approvals, findings, "
        "inconclusive canaries; label or skip them.",
    },
    {
        "name": "evaluation",
        "description": "An agent's code scorers (run, schedule, results) and evaluation sets.",
    },
]


def serve_docs(app: FastAPI) -> None:
    """Add /docs and /redoc to `app` (created with docs_url=None, redoc_url=None)."""
    app.mount(ASSETS, StaticFiles(directory=str(files("fastapi_offline") / "static")), "docs")
    favicon = f"{ASSETS}/favicon.png"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url,
            title=f"{app.title}: Swagger UI",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=favicon,
            swagger_ui_parameters={"persistAuthorization": True},
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=app.openapi_url,
            title=f"{app.title}: ReDoc",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=favicon,
            with_google_fonts=False,
        )


def summarise(router: APIRouter) -> None:
    """Each route's summary is the first paragraph of its docstring (FastAPI would title-case
    the function's name), so the docs list what each endpoint does in one line."""
    for route in router.routes:
        if isinstance(route, APIRoute) and route.summary is None and route.description:
            first = route.description.strip().split("\n\n")[0]
            route.summary = " ".join(first.split()).rstrip(".")
