"""The control API: start, follow, approve and roll back evolutions over HTTP.

Every route needs `Authorization: Bearer <admin token>`. Evolutions are Temporal workflows;
this API starts them and talks to them (updates, signals, queries), and reads what stays
after them from the registry, which is the source of truth. OpenAPI is at /openapi.json,
Swagger UI at /docs and ReDoc at /redoc (served from local files).

    config.py       its configuration, the admin token and its check
    app.py          the app
    docs.py         /docs and /redoc without a CDN; tags and one-line summaries
    evolutions.py   /api/evolutions: start, list, follow, approve, reject, abort
    agents.py       /api/agents: versions (show, diff), settings, rollback, the holdback
    schedules.py    /api/schedules: evolve an agent on a schedule
    tenants.py      /api/tenants: a tenant's data policy, changed after creation
    client.py       the one client of this API (the CLI, the demo and the scenarios use it)

Nothing is imported here, so the client stays light for the CLI.
"""
