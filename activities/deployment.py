"""Deployment hooks: when an alias moves, the engines that serve weights load them.

The gateway resolves a session's version on every request, so harness, memory and schema
changes take effect with the alias move alone. Weights live in engines:

- `local` versions need nothing here: the gateway keeps one in-process engine per
  checkpoint, so a canary gets its own instance, a promotion serves the (already loaded)
  candidate engine, and a rollback the previous one;
- `sglang` versions name the weights their servers must serve: `model.checkpoint` is the
  checkpoint directory (or, with `model.adapter`, the LoRA adapter directory) on the
  servers' disk. A full checkpoint is loaded with pause -> update_weights_from_disk ->
  continue, labelled with the version id; an adapter is loaded under its versioned name
  (`model.adapter`, e.g. "support-bot@v7") next to the others, which is how a canary shares
  a server with stable. A canary of full weights needs servers of its own: loading it into
  stable's servers would change what stable serves, so that is refused.

Every hook is idempotent (a retried activity finds the weights already served).
"""

from __future__ import annotations

import asyncio
import logging

from atdp import ModelRef
from proxy.engines.sglang_admin import SGLangAdmin
from registry import AgentVersion

__all__ = ["DeploymentError", "deploy_weights"]

log = logging.getLogger(__name__)


class DeploymentError(ValueError):
    """The weights cannot be served this way; the message says what to change."""


def deploy_weights(
    version: AgentVersion,
    alias: str,
    *,
    stable: AgentVersion | None = None,
    api_key: str | None = None,
) -> list[str]:
    """Make the servers of `version` serve its weights before `alias` points at it.

    Args:
        stable: the stable version, for a canary or shadow (to refuse a clash of servers).
    Returns:
        What was done, in words (empty when nothing was needed).
    """
    ref = version.spec.model
    if ref.engine != "sglang" or not ref.checkpoint:
        return []
    if not ref.base_url:
        raise DeploymentError(f"{version.id} names SGLang weights but no server (base_url)")
    if alias in ("canary", "shadow") and not ref.adapter and stable is not None:
        shared = set(_servers(ref)) & set(_servers(stable.spec.model))
        if shared and stable.spec.model.engine == "sglang":
            raise DeploymentError(
                f"{version.id} is a full-weight {alias} on stable's SGLang server(s) "
                f"{sorted(shared)}: loading it would change what stable serves; give the "
                "candidate its own server (model.base_url) or train a LoRA adapter"
            )
    return asyncio.run(_deploy(version, api_key))


async def _deploy(version: AgentVersion, api_key: str | None) -> list[str]:
    ref = version.spec.model
    done: list[str] = []
    for server in _servers(ref):
        admin = SGLangAdmin(server, api_key)
        try:
            if ref.adapter:
                done += await _load_adapter(admin, ref)
            elif await admin.weight_version() != version.id:
                sync = await admin.update_weights(ref.checkpoint or "", weight_version=version.id)
                done.append(
                    f"{admin.server_url}: weights {sync.previous_version} -> {sync.weight_version}"
                )
        finally:
            await admin.aclose()
    for line in done:
        log.info("deployed %s: %s", version.id, line)
    return done


async def _load_adapter(admin: SGLangAdmin, ref: ModelRef) -> list[str]:
    adapter = ref.adapter or ""
    if adapter in await admin.adapters():
        return []
    name, _, tag = adapter.rpartition("@")
    if not name or not tag:
        raise DeploymentError(
            f"an SGLang adapter is served as 'name@version' (e.g. support-bot@v7), not {adapter!r}"
        )
    await admin.load_lora_adapter(name, tag, ref.checkpoint or "")
    return [f"{admin.server_url}: LoRA adapter {adapter} loaded"]


def _servers(ref: ModelRef) -> list[str]:
    return [url for url in [ref.base_url, *ref.replicas] if url]
