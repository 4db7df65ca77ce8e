#!/usr/bin/env python
"""Make a Temporal cluster ready for Evoplane: its namespace and its search attributes.

`evoplane up` registers the search attributes on its dev server itself; a production
cluster (deploy/compose.yaml, the Temporal Helm chart) needs this once per namespace, and
again whenever workflows/search_attributes.py gains one. Safe to run again: what exists is
left as it is. Reads the same settings as the workers (EVOPLANE_TEMPORAL_ADDRESS,
EVOPLANE_TEMPORAL_NAMESPACE), so it prepares the namespace they will use.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from google.protobuf.duration_pb2 import Duration
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from evoplane.settings import load_settings
from workflows.search_attributes import ALL

__all__ = ["main", "search_attribute_types"]


def search_attribute_types() -> dict[str, int]:
    """Evoplane's search attributes, name -> the operator API's IndexedValueType number."""
    return {key.name: int(key.indexed_value_type.value) for key in ALL}


async def _connect(target: str, namespace: str, wait_seconds: float) -> Client:
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            return await Client.connect(target, namespace=namespace)
        except RuntimeError as error:
            if time.monotonic() > deadline:
                raise SystemExit(
                    f"Temporal at {target} did not answer within {wait_seconds:.0f} s ({error}); "
                    "check EVOPLANE_TEMPORAL_ADDRESS and that the frontend is up"
                ) from None
            await asyncio.sleep(2)


async def _ensure_namespace(client: Client, namespace: str, retention_days: int) -> None:
    service = client.workflow_service
    try:
        await service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
        print(f"namespace {namespace}: exists")
        return
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
    retention = Duration(seconds=retention_days * 86_400)
    await service.register_namespace(
        RegisterNamespaceRequest(namespace=namespace, workflow_execution_retention_period=retention)
    )
    print(f"namespace {namespace}: registered (retention {retention_days} d)")


async def _ensure_search_attributes(client: Client, namespace: str, wait_seconds: float) -> None:
    wanted = search_attribute_types()
    deadline = time.monotonic() + wait_seconds
    while True:  # a namespace registered a moment ago takes a few seconds to be everywhere
        try:
            listed = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace)
            )
            break
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise
            await asyncio.sleep(2)
    present = dict(listed.custom_attributes)
    wrong = {n: t for n, t in wanted.items() if n in present and present[n] != t}
    if wrong:
        raise SystemExit(
            f"search attributes {sorted(wrong)} exist in {namespace} with another type; "
            "Temporal cannot change a type: remove them (temporal operator search-attribute "
            "remove) or use a new namespace"
        )
    missing = {n: t for n, t in wanted.items() if n not in present}
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(search_attributes=missing, namespace=namespace)
        )
    added = ", ".join(sorted(missing)) or "none"
    print(
        f"search attributes in {namespace}: added {added}; registered {', '.join(sorted(wanted))}"
    )


async def _setup(retention_days: int, wait_seconds: float) -> None:
    settings = load_settings()
    if settings.temporal_address is None:
        raise SystemExit("set EVOPLANE_TEMPORAL_ADDRESS to the Temporal frontend (host:port)")
    namespace = settings.temporal_namespace
    client = await _connect(settings.temporal_target, namespace, wait_seconds)
    await _ensure_namespace(client, namespace, retention_days)
    await _ensure_search_attributes(client, namespace, wait_seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retention-days", type=int, default=30, help="for a new namespace")
    parser.add_argument("--wait", type=float, default=180.0, help="seconds to wait for Temporal")
    args = parser.parse_args(argv)
    asyncio.run(_setup(args.retention_days, args.wait))


if __name__ == "__main__":
    main()
    # The SDK's Rust threads can crash CPython's finalisation (temporalio/sdk-python#300:
    # "PyGILState_Release ... must be current"), which would fail a job that succeeded.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
