"""MLflow's Prompt and Model Registries as mirrors of Evoplane's versions and aliases."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from activities.tracking.diffs import harness_prompt_text
from activities.tracking.errors import error_code, mlflow_call
from activities.tracking.names import (
    AGENT_TAG,
    CHECKPOINT_TAG,
    PROMPT_TAG,
    VERSION_TAG,
    model_name,
    prompt_name,
    quoted,
    registry_safe,
)

__all__ = ["RegistryMirror"]

# Where a local checkpoint is registered: MLflow refuses local paths as version sources.
_PLACEHOLDER_SOURCE = "evoplane-checkpoint:/"

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
    ) -> int:
        """Register a version's harness as a prompt version (once), point `aliases` at it.

        Returns:
            The prompt version number in MLflow.
        """
        name = prompt_name(agent)
        version = self._registered_version(name, version_id, prompt=True)
        if version is None:
            created = self._create_prompt_version(name, agent, version_id, harness)
            version = self._settle_version(name, version_id, created, prompt=True)
        for alias in aliases:
            self._point_alias(self._client.set_prompt_alias, name, alias, version)
        return version

    def _create_prompt_version(
        self, name: str, agent: str, version_id: str, harness: Mapping[str, Any]
    ) -> int:
        def register() -> int:
            created = self._client.register_prompt(
                name,
                template=harness_prompt_text(harness),
                commit_message=version_id,
                tags={VERSION_TAG: version_id, AGENT_TAG: agent},
            )
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
        return mirrored

    # Model Registry

    @mlflow_call
    def register_checkpoint(
        self, agent: str, version_id: str, uri: str, aliases: Iterable[str] = ()
    ) -> int:
        """Register a version's checkpoint as a model version (once), point `aliases` at it.

        Returns:
            The model version number in MLflow.
        """
        name = model_name(agent)
        self._ensure_registered_model(name, agent)
        version = self._registered_version(name, version_id, prompt=False)
        if version is None:
            created = self._create_checkpoint_version(name, version_id, uri)
            version = self._settle_version(name, version_id, created, prompt=False)
        for alias in aliases:
            self._point_alias(self._client.set_registered_model_alias, name, alias, str(version))
        return version

    def _ensure_registered_model(self, name: str, agent: str) -> None:
        try:
            self._client.create_registered_model(
                name, tags={AGENT_TAG: agent}, description=f"Checkpoints of agent {agent}"
            )
        except MlflowException as error:
            if error_code(error) != "RESOURCE_ALREADY_EXISTS":
                raise

    def _create_checkpoint_version(self, name: str, version_id: str, uri: str) -> int:
        """A model version whose source is the checkpoint URI where MLflow accepts it.

        MLflow servers refuse local paths (and http URLs) as sources; those checkpoints are
        registered under a placeholder source, with the exact reference in a tag either way.
        """
        tags = {VERSION_TAG: version_id, CHECKPOINT_TAG: uri}
        try:
            created = self._client.create_model_version(
                name, source=uri, tags=tags, description=version_id, await_creation_for=0
            )
        except MlflowException as error:
            if error_code(error) != "INVALID_PARAMETER_VALUE":
                raise
            logger.debug("MLflow refused source %r (%s); using a placeholder", uri, error.message)
            created = self._client.create_model_version(
                name,
                source=_PLACEHOLDER_SOURCE + registry_safe(version_id),
                tags=tags,
                description=version_id,
                await_creation_for=0,
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
        return mirrored

    # Registry versions, found by our version id

    def _tagged_versions(self, name: str, version_id: str, *, prompt: bool) -> list[int]:
        """The registry versions of `name` tagged with our version id, lowest first."""
        filters = [f"name = {quoted(name)}", f"tag.`{VERSION_TAG}` = {quoted(version_id)}"]
        if prompt:
            filters.append(f"tag.`{PROMPT_TAG}` = 'true'")  # without it MLflow hides prompts
        found = self._client.search_model_versions(" AND ".join(filters))
        return sorted(int(version.version) for version in found)

    def _registered_version(self, name: str, version_id: str, *, prompt: bool) -> int | None:
        versions = self._tagged_versions(name, version_id, prompt=prompt)
        return versions[0] if versions else None

    def _require_version(self, name: str, version_id: str, *, prompt: bool, how: str) -> int:
        version = self._registered_version(name, version_id, prompt=prompt)
        if version is None:
            raise ValueError(f"{name} has no version for {version_id}; register it with {how}")
        return version

    def _settle_version(self, name: str, version_id: str, created: int, *, prompt: bool) -> int:
        """After two attempts raced to register, keep the lowest version and drop ours.

        Version numbers come from the server, so every racer agrees on the lowest one.
        """
        winner = min(self._tagged_versions(name, version_id, prompt=prompt), default=created)
        if winner != created:
            logger.info(
                "%s already had version %s for %s; dropping %s", name, winner, version_id, created
            )
            if prompt:
                self._client.delete_prompt_version(name, str(created))
            else:
                self._client.delete_model_version(name, str(created))
        return winner

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
