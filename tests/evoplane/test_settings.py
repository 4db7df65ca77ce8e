"""Settings: environment over evoplane.toml over defaults; derived defaults in one place."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from evoplane.settings import SettingsError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in list(__import__("os").environ):
        if name.startswith("EVOPLANE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults_point_at_the_embedded_stack(tmp_path: Path) -> None:
    settings = load_settings()
    assert settings.registry_url == f"sqlite:///{tmp_path / '.evoplane' / 'registry.db'}"
    assert settings.temporal_target == "127.0.0.1:7233"
    assert settings.tracking_uri == "http://127.0.0.1:5000"
    assert (settings.gateway_port, settings.api_port) == (8400, 8401)
    assert settings.embedded_temporal and settings.embedded_mlflow


def test_precedence_flag_env_file(monkeypatch, tmp_path: Path) -> None:
    (tmp_path / "evoplane.toml").write_text(
        'mlflow_port = 6001\ntemporal_port = 7300\ndata_dir = "state"\n'
    )
    monkeypatch.setenv("EVOPLANE_MLFLOW_PORT", "6002")
    settings = load_settings()
    assert (settings.mlflow_port, settings.temporal_port) == (6002, 7300)
    assert settings.data_dir == Path("state")
    assert load_settings(mlflow_port=6003, temporal_port=None).mlflow_port == 6003


def test_config_file_named_by_env(monkeypatch, tmp_path: Path) -> None:
    config = tmp_path / "elsewhere.toml"
    config.write_text('database_url = "postgresql+psycopg://db.internal/evoplane"\n')
    monkeypatch.setenv("EVOPLANE_CONFIG", str(config))
    assert load_settings().registry_url == "postgresql+psycopg://db.internal/evoplane"


def test_bad_values_name_the_setting(monkeypatch) -> None:
    monkeypatch.setenv("EVOPLANE_GATEWAY_PORT", "99999")
    with pytest.raises(ValidationError, match="gateway_port"):
        load_settings()


def test_unknown_keys_in_the_file_are_refused(tmp_path: Path) -> None:
    (tmp_path / "evoplane.toml").write_text("mlflow_prot = 1\n")
    with pytest.raises(ValidationError, match="mlflow_prot"):
        load_settings()


def test_tool_simulators_load_from_an_import_path_or_say_what_is_wrong() -> None:
    from evoplane.settings import SettingsError
    from evoplane.worker import load_tool_simulators

    assert load_tool_simulators(None) == {}
    loaded = load_tool_simulators("tests.evoplane.test_settings:SIMULATORS")
    assert loaded["echo"]("lookup", '{"id": 1}') == "lookup"
    for bad in ("tests.evoplane.nope:SIMULATORS", "tests.evoplane.test_settings:MISSING"):
        with pytest.raises(SettingsError, match="cannot be loaded"):
            load_tool_simulators(bad)
    with pytest.raises(SettingsError, match="mapping from name to a callable"):
        load_tool_simulators("tests.evoplane.test_settings:NOT_CALLABLE")


SIMULATORS = {"echo": lambda name, arguments: name}
NOT_CALLABLE = {"echo": "not a function"}


def test_gateway_config_carries_the_seal_key_and_local_engine_settings(monkeypatch) -> None:
    from evoplane.cli.gateway_cmd import gateway_config

    monkeypatch.setenv("EVOPLANE_SEAL_KEY", "k" * 43 + "=")
    monkeypatch.setenv("EVOPLANE_LOCAL_THREADS", "1")
    monkeypatch.setenv("EVOPLANE_LOCAL_DEVICE", "cuda:1")
    monkeypatch.setenv("EVOPLANE_CATALOG_TTL", "0.25")
    config = gateway_config(load_settings())
    assert config.seal_key == "k" * 43 + "="
    assert (config.local_threads, config.local_device) == (1, "cuda:1")
    assert config.catalog_ttl == 0.25


def test_gateway_config_carries_the_opentelemetry_settings(monkeypatch) -> None:
    from evoplane.cli.gateway_cmd import gateway_config

    config = gateway_config(load_settings())
    assert (config.otel_endpoint, config.otel_headers, config.otel_content) == (None, {}, False)
    monkeypatch.setenv("EVOPLANE_OTEL_ENDPOINT", "http://127.0.0.1:5000/v1/traces")
    headers = "x-mlflow-experiment-id=7, Authorization=Basic%20YWI="
    monkeypatch.setenv("EVOPLANE_OTEL_HEADERS", headers)
    monkeypatch.setenv("EVOPLANE_OTEL_CONTENT", "true")
    monkeypatch.setenv("EVOPLANE_OTEL_SERVICE_NAME", "edge-gateway")
    config = gateway_config(load_settings())
    assert config.otel_endpoint == "http://127.0.0.1:5000/v1/traces"
    assert config.otel_headers == {"x-mlflow-experiment-id": "7", "authorization": "Basic YWI="}
    assert (config.otel_content, config.otel_service_name) == (True, "edge-gateway")
    monkeypatch.setenv("EVOPLANE_OTEL_HEADERS", "x-mlflow-experiment-id=7,secret-token")
    with pytest.raises(SettingsError, match="entry 2 is not `name=value`") as refused:
        gateway_config(load_settings())
    assert "secret-token" not in str(refused.value)


def test_temporal_tls_follows_the_settings(monkeypatch, tmp_path: Path) -> None:
    """Plain by default; TLS with the system's CAs when asked or when an API key is set;
    the CA and client certificate files read into the TLS config; a half mTLS refused."""
    from temporalio.service import TLSConfig

    from evoplane.settings import SettingsError
    from evoplane.worker import temporal_tls

    assert temporal_tls(load_settings()) is False
    monkeypatch.setenv("EVOPLANE_TEMPORAL_API_KEY", "cloud-key")
    assert temporal_tls(load_settings()) is True
    monkeypatch.delenv("EVOPLANE_TEMPORAL_API_KEY")
    for name, text in (("ca.pem", "CA"), ("client.pem", "CERT"), ("client.key", "KEY")):
        (tmp_path / name).write_text(text)
    monkeypatch.setenv("EVOPLANE_TEMPORAL_TLS_CA", str(tmp_path / "ca.pem"))
    assert temporal_tls(load_settings()) == TLSConfig(server_root_ca_cert=b"CA")
    monkeypatch.setenv("EVOPLANE_TEMPORAL_TLS_CERT", str(tmp_path / "client.pem"))
    with pytest.raises(SettingsError, match="go together"):
        temporal_tls(load_settings())
    monkeypatch.setenv("EVOPLANE_TEMPORAL_TLS_KEY", str(tmp_path / "client.key"))
    assert temporal_tls(load_settings()) == TLSConfig(
        server_root_ca_cert=b"CA", client_cert=b"CERT", client_private_key=b"KEY"
    )
    monkeypatch.setenv("EVOPLANE_TEMPORAL_TLS_CA", str(tmp_path / "missing.pem"))
    with pytest.raises(SettingsError, match="missing.pem"):
        temporal_tls(load_settings())


def test_the_temporal_ui_link_can_name_the_address_people_open(monkeypatch) -> None:
    monkeypatch.setenv("EVOPLANE_HOST", "0.0.0.0")
    assert load_settings().temporal_ui_url == "http://0.0.0.0:8233"  # the embedded UI
    # In a container the services bind every interface; a link to 0.0.0.0 opens nothing.
    assert load_settings().temporal_ui_link == "http://127.0.0.1:8233"
    monkeypatch.setenv("EVOPLANE_HOST", "10.0.0.5")
    assert load_settings().temporal_ui_link == "http://10.0.0.5:8233"
    monkeypatch.setenv("EVOPLANE_TEMPORAL_UI", "https://temporal.example.com/")
    assert load_settings().temporal_ui_url == "https://temporal.example.com/"
    assert load_settings().temporal_ui_link == "https://temporal.example.com"


def test_the_event_codec_setting_is_checked_and_handed_to_the_registry_writers(
    monkeypatch, tmp_path
) -> None:
    from registry.bodies import encoding

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("EVOPLANE_EVENT_CODEC", "on")  # restored after the test, whatever
    (tmp_path / "evoplane.toml").write_text('event_codec = "off"\n')
    monkeypatch.delenv("EVOPLANE_EVENT_CODEC")
    assert load_settings().event_codec == "off" and not encoding()
    monkeypatch.setenv("EVOPLANE_EVENT_CODEC", "sometimes")
    with pytest.raises(ValidationError, match="event_codec"):
        load_settings()
