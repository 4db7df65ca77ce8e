"""The real gateway (proxy.create_app) served by uvicorn on a loopback port, for tests."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import uvicorn

from atdp import Harness, ModelRef, VersionSpec
from proxy.app import create_app
from proxy.config import GatewayConfig
from proxy.gateway import Gateway
from proxy.http_protocol import CoalescingHttpProtocol
from registry import create_agent, create_api_key, create_tenant, grant_agent, transaction

__all__ = ["GatewayServer", "seed_gateway_world"]


class GatewayServer:
    """`with GatewayServer(config) as gw:` -> `gw.base_url` ("http://127.0.0.1:PORT/v1")."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.app = create_app(config)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(
                self.app,
                host="127.0.0.1",
                port=self.port,
                log_config=None,
                log_level="warning",
                access_log=False,
                lifespan="on",
                http=CoalescingHttpProtocol,  # as `evoplane gateway` serves
            )
        )
        self._thread = threading.Thread(target=self._server.run, name="gateway", daemon=True)

    @property
    def gateway(self) -> Gateway:
        return self.app.state.gateway

    def flush(self) -> None:
        """Wait until every captured record is in the registry."""
        assert self.gateway.writer.flush(30), "capture writer did not drain"

    def __enter__(self) -> GatewayServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("gateway did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)


def seed_gateway_world(
    engine, upstream_url: str, spec: VersionSpec | None = None
) -> dict[str, str]:
    """Tenants acme and globex, agent support-bot on `upstream_url`, and keys for both."""
    spec = spec or VersionSpec(
        model=ModelRef(engine="openai", base_url=upstream_url, model="scripted-model"),
        harness=Harness(instructions="You are Acme's support agent."),
    )
    with transaction(engine) as session:
        create_agent(session, "support-bot", spec, author="test")
        create_agent(session, "internal-bot", spec, author="test")
        keys = {}
        for tenant in ("acme", "globex"):
            create_tenant(session, tenant)
            grant_agent(session, tenant, "support-bot")
            keys[tenant] = create_api_key(session, tenant).key
        keys["acme-limited"] = create_api_key(session, "acme", agents=["internal-bot"]).key
    return keys


def spool_files(path: Path) -> str:
    return "".join(p.read_text() for p in path.rglob("*.jsonl"))
