"""MLflow's Prompt and Model Registries as mirrors of Evoplane's versions and aliases."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.prompt.constants import PROMPT_ASSOCIATED_RUN_IDS_TAG_KEY as PROMPT_RUNS_TAG
from mlflow.tracing.constant import TraceTagKey
from mlflow.tracing.utils.prompt import update_linked_prompts_tag

from activities.tracking.diffs import harness_prompt_text
from activities.tracking.errors import error_code, mlflow_call
from activities.tracking.names import (
    AGENT_TAG,
    CHECKPOINT_TAG,
    HARNESS_HASH_TAG,
    PROMPT_TAG,
    VERSION_NUMBER_TAG,
    VERSION_TAG,
    model_name,
    prompt_name,
    quoted,
    registry_safe,
    short_version,
    version_alias,
)
from activities.tracking.values import pretty_json

__all__ = ["RegistryMirror"]

# Where a local checkpoint is registered: MLflow refuses local paths as version sources.
_PLACEHOLDER_SOURCE = "evoplane-checkpoint:/"
_LIVE_ALIASES = ("stable", "canary")  # the ones a registry's description names
# Tags MLflow copies from a prompt's newest version onto the prompt itself, where they would
# name whichever version happened to be registered last.
_VERSION_ONLY_TAGS = (VERSION_TAG, VERSION_NUMBER_TAG, HARNESS_HASH_TAG)

logger = logging.getLogger(__name__)


class RegistryMirror:
    """Our versions mirrored into MLflow's Prompt and Model Registries, aliases following ours.

    A part of `EvolutionTracker`, which holds the client (`_client`).
    """

    _client: MlflowClient
    tracking_uri: str

    @mlflow_call
    def register_prompt(
        self,
        agent: str,
        version_id: str,
        harness: Mapping[str, Any],
        aliases: Iterable[str] = (),
        run_id: str | None = None,
    ) -> int:
        """Register a version's harness as a prompt version (once), alias it `evoplane-v<N>`
        and point `aliases` at it; link it to the run that made it when given.

        A version is found again by its id and its harness's hash: an MLflow shared with
        another (or an earlier) Evoplane registry may hold a different `v3` of the agent.

        Returns:
            The prompt version number in MLflow.
        """
        name, digest = prompt_name(agent), harness_hash(harness)
        content = (HARNESS_HASH_TAG, digest)
        version = self._registered_version(name, version_id, prompt=True, content=content)
        if version is None:
            created = self._create_prompt_version(name, agent, version_id, harness, digest)
            version = self._settle_version(name, version_id, created, prompt=True, content=content)
        for alias in [version_alias(version_id), *aliases]:
            self._point_alias(self._client.set_prompt_alias, name, alias, version)
        if run_id:
            self._link_prompt_to_run(run_id, name, version)
        self._describe(name, agent, prompt=True)
        return version

    def _link_prompt_to_run(self, run_id: str, name: str, version: int) -> None:
        """The run lists the prompt version among its linked prompts (its tag, as MLflow's
        own link writes it). MLflow's `link_prompt_version_to_run` writes through the
        process-wide tracking URI, not this client's, so the tag is written here."""
        prompt = self._client.get_prompt_version(name, version)
        current = self._client.get_run(run_id).data.tags.get(TraceTagKey.LINKED_PROMPTS)
        wanted = update_linked_prompts_tag(current, [prompt])
        if wanted != current:
            self._client.set_tag(run_id, TraceTagKey.LINKED_PROMPTS, wanted)
        # And the other way: the version names its run (what `list_logged_prompts` reads).
        runs = [run for run in (prompt.tags.get(PROMPT_RUNS_TAG) or "").split(",") if run]
        if run_id not in runs:
            joined = ",".join([*runs, run_id])
            self._client.set_prompt_version_tag(name, version, PROMPT_RUNS_TAG, joined)

    def _create_prompt_version(
        self, name: str, agent: str, version_id: str, harness: Mapping[str, Any], digest: str
    ) -> int:
        tags = {
            VERSION_TAG: version_id,
            VERSION_NUMBER_TAG: short_version(version_id),
            HARNESS_HASH_TAG: digest,
            AGENT_TAG: agent,
        }

        def register() -> int:
            created = self._client.register_prompt(
                name, template=harness_prompt_text(harness), commit_message=version_id, tags=tags
            )
            for key in _VERSION_ONLY_TAGS:
                self._ignore_missing(self._client.delete_prompt_tag, name, key)
            return int(created.version)

        try:
            return register()
        except MlflowException as error:
            # Two first registrations raced to create the prompt itself; it exists now.
            if error_code(error) != "RESOURCE_ALREADY_EXISTS":
                raise
            return register()

    @mlflow_call
    def mirror_prompt_aliases(
        self, agent: str, aliases: Mapping[str, str | None]
    ) -> dict[str, int | None]:
        """Point each alias at the prompt version of our version id; None deletes the alias.

        Returns:
            alias -> the prompt version it now names (None: deleted).
        """
        name = prompt_name(agent)
        mirrored: dict[str, int | None] = {}
        for alias, version_id in aliases.items():
            if version_id is None:
                self._ignore_missing(self._client.delete_prompt_alias, name, alias)
                mirrored[alias] = None
                continue
            version = self._require_version(name, version_id, prompt=True, how="register_prompt")
            self._point_alias(self._client.set_prompt_alias, name, alias, version)
            mirrored[alias] = version
        self._describe(name, agent, prompt=True)
        return mirrored

    # Model Registry

    @mlflow_call
    def register_checkpoint(
        self,
        agent: str,
        version_id: str,
        uri: str,
        aliases: Iterable[str] = (),
        run_id: str | None = None,
    ) -> int:
        """Register a version's checkpoint as a model version (once), with the run that
        trained it, alias it `evoplane-v<N>` and point `aliases` at it.

        Returns:
            The model version number in MLflow.
        """
        name = model_name(agent)
        self._ensure_registered_model(name, agent)
        content = (CHECKPOINT_TAG, uri)
        version = self._registered_version(name, version_id, prompt=False, content=content)
        if version is None:
            created = self._create_checkpoint_version(name, version_id, uri, run_id)
            version = self._settle_version(name, version_id, created, prompt=False, content=content)
        for alias in [version_alias(version_id), *aliases]:
            self._point_alias(self._client.set_registered_model_alias, name, alias, str(version))
        self._describe(name, agent, prompt=False)
        return version

    def _ensure_registered_model(self, name: str, agent: str) -> None:
        try:
            self._client.create_registered_model(
                name, tags={AGENT_TAG: agent}, description=f"Checkpoints of agent {agent}"
            )
        except MlflowException as error:
            if error_code(error) != "RESOURCE_ALREADY_EXISTS":
                raise

    def _create_checkpoint_version(
        self, name: str, version_id: str, uri: str, run_id: str | None
    ) -> int:
        """A model version whose source is the checkpoint URI where MLflow accepts it.

        MLflow servers refuse local paths (and http URLs) as sources; those checkpoints are
        registered under a placeholder source, with the exact reference in a tag either way.
        """
        tags = {
            VERSION_TAG: version_id,
            VERSION_NUMBER_TAG: short_version(version_id),
            CHECKPOINT_TAG: uri,
        }
        made = {"run_id": run_id, "tags": tags, "description": version_id}
        try:
            created = self._client.create_model_version(
                name, source=uri, await_creation_for=0, **made
            )
        except MlflowException as error:
            if error_code(error) != "INVALID_PARAMETER_VALUE":
                raise
            logger.debug("MLflow refused source %r (%s); using a placeholder", uri, error.message)
            created = self._client.create_model_version(
                name,
                source=_PLACEHOLDER_SOURCE + registry_safe(version_id),
                await_creation_for=0,
                **made,
            )
        return int(created.version)

    @mlflow_call
    def mirror_model_aliases(
        self, agent: str, aliases: Mapping[str, str | None]
    ) -> dict[str, int | None]:
        """Point each alias at the model version of our version id; None deletes the alias.

        Returns:
            alias -> the model version it now names (None: deleted).
        """
        name = model_name(agent)
        mirrored: dict[str, int | None] = {}
        for alias, version_id in aliases.items():
            if version_id is None:
                self._ignore_missing(self._client.delete_registered_model_alias, name, alias)
                mirrored[alias] = None
                continue
            version = self._require_version(
                name, version_id, prompt=False, how="register_checkpoint"
            )
            self._point_alias(self._client.set_registered_model_alias, name, alias, str(version))
            mirrored[alias] = version
        self._describe(name, agent, prompt=False)
        return mirrored

    # Registry versions, found by our version id

    def _tagged_versions(
        self,
        name: str,
        version_id: str,
        *,
        prompt: bool,
        content: tuple[str, str] | None = None,
    ) -> list[int]:
        """The registry versions of `name` tagged with our version id (and `content`, a tag
        and the value it must have), lowest first."""
        filters = [f"name = {quoted(name)}", f"tag.`{VERSION_TAG}` = {quoted(version_id)}"]
        if prompt:
            filters.append(f"tag.`{PROMPT_TAG}` = 'true'")  # without it MLflow hides prompts
        found = self._client.search_model_versions(" AND ".join(filters))
        if content is not None:
            key, value = content
            found = [version for version in found if version.tags.get(key) == value]
        return sorted(int(version.version) for version in found)

    def _registered_version(
        self,
        name: str,
        version_id: str,
        *,
        prompt: bool,
        content: tuple[str, str] | None = None,
    ) -> int | None:
        """The newest registry version of our version id: one registered by an earlier
        registry under the same id is older, and never the one meant."""
        versions = self._tagged_versions(name, version_id, prompt=prompt, content=content)
        if content is not None:
            return versions[0] if versions else None  # racers settle on the lowest
        return versions[-1] if versions else None

    def _require_version(self, name: str, version_id: str, *, prompt: bool, how: str) -> int:
        version = self._registered_version(name, version_id, prompt=prompt)
        if version is None:
            raise ValueError(f"{name} has no version for {version_id}; register it with {how}")
        return version

    def _settle_version(
        self,
        name: str,
        version_id: str,
        created: int,
        *,
        prompt: bool,
        content: tuple[str, str],
    ) -> int:
        """After two attempts raced to register, keep the lowest version and drop ours.

        Version numbers come from the server, so every racer agrees on the lowest one.
        """
        tagged = self._tagged_versions(name, version_id, prompt=prompt, content=content)
        winner = min(tagged, default=created)
        if winner != created:
            logger.info(
                "%s already had version %s for %s; dropping %s", name, winner, version_id, created
            )
            if prompt:
                self._client.delete_prompt_version(name, str(created))
            else:
                self._client.delete_model_version(name, str(created))
        return winner

    def _describe(self, name: str, agent: str, *, prompt: bool) -> None:
        """Keep the registry entry's description current: which versions are live now.

        MLflow's client refuses to update a prompt's description (a prompt's first commit
        message stays its description otherwise), so this goes through its registry client,
        which updates prompts and models alike.
        """
        registry = self._client._get_registry_client()
        entry = registry.get_registered_model(name)
        live = []
        for alias in _LIVE_ALIASES:
            number = entry.aliases.get(alias)
            if number is not None:
                tags = registry.get_model_version(name, str(number)).tags
                live.append(f"{alias} is {tags.get(VERSION_TAG, '?')} (version {number})")
        what = "The harness" if prompt else "Checkpoints"
        text = (
            f"{what} of agent {agent}, mirrored from Evoplane's registry (the source of truth)."
            f" {'; '.join(live) or 'No version is live'}. Each version is tagged "
            f"{VERSION_NUMBER_TAG} and aliased evoplane-v<N> after Evoplane's version number."
        )
        if entry.description != text:
            registry.update_registered_model(name, description=text)

    @staticmethod
    def _point_alias(set_alias: Callable[..., None], name: str, alias: str, version: Any) -> None:
        """Set an alias, once more if a concurrent first set of the same alias collided.

        MLflow inserts a new alias row without a lock, so two racers can hit its unique key;
        the second try finds the row and updates it.
        """
        try:
            set_alias(name, alias, version)
        except MlflowException as error:
            if error_code(error) != "BAD_REQUEST":
                raise
            set_alias(name, alias, version)

    @staticmethod
    def _ignore_missing(delete: Callable[..., None], *args: str) -> None:
        """Run a delete that is done already when its target does not exist."""
        try:
            delete(*args)
        except MlflowException as error:
            if error_code(error) != "RESOURCE_DOES_NOT_EXIST":
                raise


def harness_hash(harness: Mapping[str, Any]) -> str:
    """A short fingerprint of a harness, to tell two registries' same-numbered versions apart."""
    return hashlib.sha256(pretty_json(dict(harness)).encode()).hexdigest()[:16]
