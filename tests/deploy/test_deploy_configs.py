"""deploy/ is read by Docker Compose, Kubernetes and Docker, none of which runs here.

These tests check what can be checked without them: the files parse, every reference
inside them resolves (services, volumes, secrets, Services, ConfigMaps, files of the repo),
every `evoplane ...` command they run is a real command of the CLI with real options, every
EVOPLANE_* variable they set is a setting, and the two shell scripts operators run behave.
Each checker returns a list of problems, and the last tests feed them broken copies, so a
misspelt command or a dangling reference is known to fail the suite.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from evoplane.cli import app as cli_app
from evoplane.cli.gateway_cmd import gateway_config
from evoplane.settings import CONFIG_ENV, Settings
from workflows.search_attributes import ALL as SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
DOCKER = DEPLOY / "docker"
DOCKERFILES = {"cpu": DOCKER / "cpu.Dockerfile", "gpu": DOCKER / "gpu.Dockerfile"}

EXPECTED_SERVICES = {
    "postgres",
    "temporal-schema",
    "temporal",
    "temporal-setup",
    "temporal-ui",
    "mlflow",
    "migrate",
    "gateway",
    "lb",
    "api",
    "worker",
    "gpu-worker",
    "sglang",
}
EXPECTED_K8S = {
    ("Namespace", "evoplane"),
    ("ServiceAccount", "evoplane"),
    ("ConfigMap", "evoplane-config"),
    ("Job", "evoplane-migrate"),
    ("Job", "evoplane-temporal-setup"),
    ("CronJob", "evoplane-gc"),
    ("StatefulSet", "evoplane-gateway"),
    ("Service", "evoplane-gateway"),
    ("HorizontalPodAutoscaler", "evoplane-gateway"),
    ("Deployment", "evoplane-api"),
    ("Service", "evoplane-api"),
    ("Deployment", "evoplane-worker"),
    ("Deployment", "evoplane-gpu-worker"),
    ("StatefulSet", "evoplane-sglang"),
    ("Service", "evoplane-sglang"),
    ("PersistentVolumeClaim", "evoplane-checkpoints"),
    ("Ingress", "evoplane-gateway"),
    ("Ingress", "evoplane-api"),
    ("NetworkPolicy", "default-deny-ingress"),
}
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "Job", "CronJob"}


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def compose_env() -> dict[str, str]:
    lines = (DEPLOY / "compose" / "evoplane.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if line and not line.startswith("#"))


def k8s_docs() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    return [doc for name in kustomization["resources"] for doc in yaml_docs(K8S / name)]


def deploy_text_files() -> Iterator[Path]:
    for path in sorted(DEPLOY.rglob("*")):
        if path.is_file() and "secrets" not in path.relative_to(DEPLOY).parts:
            yield path


# --- the `evoplane` command line ------------------------------------------------------------

CLI = typer.main.get_command(cli_app)
RUNNER = CliRunner()


def cli_problems(argv: Sequence[str]) -> list[str]:
    """What is wrong with `evoplane *argv`: an unknown command or option, a missing command."""
    command = CLI  # typer's own click: a group is what has sub-commands
    path: list[str] = []
    rest = list(argv)
    while getattr(command, "commands", None) is not None:
        if not rest or rest[0].startswith("-"):
            if rest[:1] == ["--help"]:
                return []
            return [f"`evoplane {' '.join(path)}` needs a command"]
        name = rest.pop(0)
        if name not in command.commands:
            known = ", ".join(sorted(command.commands))
            return [f"`evoplane {' '.join([*path, name])}`: no such command (known: {known})"]
        command = command.commands[name]
        path.append(name)
    options = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    problems = [
        f"`evoplane {' '.join(path)}` has no option {flag}"
        for flag in (word.split("=", 1)[0] for word in rest if word.startswith("--"))
        if flag not in options | {"--help"}
    ]
    result = RUNNER.invoke(cli_app, [*path, "--help"])
    if result.exit_code != 0:
        problems.append(f"`evoplane {' '.join(path)} --help` exited {result.exit_code}")
    return problems


# `evoplane` as a word of its own: not evoplane-cpu, evoplane_app, /var/lib/evoplane, evoplane.toml.
EVOPLANE_WORD = re.compile(r"(?<![\w./:-])evoplane(?![\w./:-])")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
# ... and `docker compose exec api evoplane-entrypoint evoplane status` (deploy/README.md).
COMMAND_STARTERS = {"--", "&&", "||", ";", "|", "$", "exec", "sudo", "env", "evoplane-entrypoint"}
COMMAND_OPENERS = ("`", "$(", "(", '"', "'")
ARGV_END = re.compile(r"[`\"'|;&)<>]")


def commands_in_text(text: str, services: set[str]) -> list[list[str]]:
    """The argv of each `evoplane ...` command written in shell, docs or comments.

    `evoplane` counts as a command where a command starts: first on the line, after an
    operator, `--`, `$(`, a backtick, an assignment, or a Compose service name
    (`docker compose exec api evoplane status`); not in `kubectl -n evoplane`.
    """
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        for match in EVOPLANE_WORD.finditer(line):
            before = line[: match.start()].rstrip()
            words = before.split()
            previous = words[-1].lstrip("#") if words else ""
            starts = (
                not previous
                or before.endswith(COMMAND_OPENERS)
                or previous in COMMAND_STARTERS
                or previous in services
                or ASSIGNMENT.match(previous)
            )
            rest = ARGV_END.split(line[match.end() :], maxsplit=1)[0].split()
            if starts and rest and re.fullmatch(r"[a-z][a-z0-9-]*", rest[0]):
                found.append(rest)
    return found


def structured_commands() -> Iterator[tuple[str, list[str]]]:
    """(where, argv after `evoplane`) for every command of compose, k8s and Dockerfiles."""
    for name, service in compose()["services"].items():
        for key in ("entrypoint", "command"):
            argv = service.get(key)
            if isinstance(argv, str):
                argv = argv.split()
            if argv and argv[0] == "evoplane":
                yield f"compose service {name} ({key})", argv[1:]
    for doc in k8s_docs():
        for container in containers(doc):
            argv = [*container.get("command", []), *container.get("args", [])]
            if argv and argv[0] == "evoplane":
                yield f"{doc['kind']} {doc['metadata']['name']}", argv[1:]
    for label, dockerfile in DOCKERFILES.items():
        for instruction, argv in dockerfile_exec_forms(dockerfile):
            if argv and argv[0] == "evoplane":
                yield f"{label} Dockerfile {instruction}", argv[1:]


def text_commands() -> Iterator[tuple[str, list[str]]]:
    services = set(compose()["services"])
    for path in deploy_text_files():
        if path.suffix in {".md", ".sh", ".yaml", ".env", ".conf"} or "Dockerfile" in path.name:
            for argv in commands_in_text(path.read_text(), services):
                yield str(path.relative_to(ROOT)), argv


# --- environment variables ------------------------------------------------------------------

SETTING_NAMES = {f"EVOPLANE_{field.upper()}" for field in Settings.model_fields}
# EVOPLANE_CONFIG names the TOML file (read by settings.py itself); *_FILE variants are
# resolved by deploy/docker/entrypoint.sh into the setting of the same name.
KNOWN_EVOPLANE_VARS = SETTING_NAMES | {CONFIG_ENV} | {f"{name}_FILE" for name in SETTING_NAMES}
EVOPLANE_VAR = re.compile(r"\bEVOPLANE_[A-Z0-9_]*[A-Z0-9]\b")


def unknown_evoplane_vars(text: str) -> set[str]:
    return set(EVOPLANE_VAR.findall(text)) - KNOWN_EVOPLANE_VARS


# --- compose ----------------------------------------------------------------------------------


def depends_on(service: dict[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on", {})
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {name: spec.get("condition", "service_started") for name, spec in deps.items()}


def compose_problems(doc: dict[str, Any], base: Path = DEPLOY) -> list[str]:
    """Dangling references in a compose file: services, volumes, secrets, files."""
    problems: list[str] = []
    services = doc.get("services", {})
    volumes, secrets = set(doc.get("volumes") or {}), set(doc.get("secrets") or {})
    for name, service in services.items():
        for target, condition in depends_on(service).items():
            if target not in services:
                problems.append(f"{name} depends on unknown service {target}")
                continue
            dependency = services[target]
            if condition == "service_healthy" and "healthcheck" not in dependency:
                problems.append(f"{name} waits for {target} to be healthy; it has no healthcheck")
            if condition == "service_completed_successfully" and dependency.get("restart") != "no":
                problems.append(f"{name} waits for {target} to complete; it is not one-shot")
            if dependency.get("profiles") and not service.get("profiles"):
                problems.append(f"{name} (always on) depends on {target}, which has a profile")
        own_secrets = {s if isinstance(s, str) else s["source"] for s in service.get("secrets", [])}
        problems += [f"{name} uses undeclared secret {s}" for s in sorted(own_secrets - secrets)]
        for key, value in (service.get("environment") or {}).items():
            if key.endswith("_FILE") and str(value).startswith("/run/secrets/"):
                secret = str(value).removeprefix("/run/secrets/")
                if secret not in own_secrets:
                    problems.append(f"{name}: {key} reads secret {secret}, not given to it")
        for volume in service.get("volumes", []):
            if isinstance(volume, str):
                source = volume.split(":")[0] if ":" in volume else ""
            else:
                source = volume.get("source", "")
            if not source or source.startswith("/"):
                continue  # anonymous volume, or an absolute host path
            if source.startswith("."):
                if not (base / source).exists():
                    problems.append(f"{name} mounts {source}, which does not exist")
            elif source not in volumes:
                problems.append(f"{name} uses undeclared volume {source}")
        for env_file in service.get("env_file", []):
            if not (base / env_file).exists():
                problems.append(f"{name} reads env file {env_file}, which does not exist")
        build = service.get("build")
        if build:
            context = base / build["context"]
            if not (context / build.get("dockerfile", "Dockerfile")).exists():
                problems.append(f"{name} builds from a Dockerfile that does not exist")
    for name, spec in (doc.get("secrets") or {}).items():
        if "file" in spec and not str(spec["file"]).startswith("./compose/secrets/"):
            problems.append(f"secret {name} is not under compose/secrets/ (make-secrets.sh)")
    return problems


# --- kubernetes -------------------------------------------------------------------------------


def pod_template(doc: dict[str, Any]) -> dict[str, Any] | None:
    if doc.get("kind") == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]
    if doc.get("kind") in WORKLOAD_KINDS:
        return doc["spec"]["template"]
    return None


def pod_spec(doc: dict[str, Any]) -> dict[str, Any] | None:
    template = pod_template(doc)
    return template["spec"] if template else None


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = pod_spec(doc)
    return [*spec.get("initContainers", []), *spec["containers"]] if spec else []


def template_labels(doc: dict[str, Any]) -> dict[str, str]:
    return pod_template(doc)["metadata"].get("labels", {})


def k8s_problems(docs: list[dict[str, Any]], secrets: dict[str, set[str]]) -> list[str]:
    """Dangling references between manifests: selectors, Services, claims, config, secrets."""
    problems: list[str] = []
    for doc in docs:
        if not {"apiVersion", "kind", "metadata"} <= doc.keys() or "name" not in doc["metadata"]:
            problems.append(f"not a Kubernetes object: {str(doc)[:80]}")
    named = {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs if "metadata" in doc}
    workloads = [doc for doc in docs if doc.get("kind") in WORKLOAD_KINDS]
    for doc in workloads:
        where = f"{doc['kind']} {doc['metadata']['name']}"
        selector = doc["spec"].get("selector", {}).get("matchLabels", {})
        if not selector.items() <= template_labels(doc).items():
            problems.append(f"{where}: selector does not match its pod labels")
        if doc["kind"] == "StatefulSet" and ("Service", doc["spec"]["serviceName"]) not in named:
            problems.append(f"{where}: serviceName {doc['spec']['serviceName']} does not exist")
        volumes = {t["metadata"]["name"] for t in doc["spec"].get("volumeClaimTemplates", [])}
        for volume in pod_spec(doc).get("volumes", []):
            claim = volume.get("persistentVolumeClaim", {}).get("claimName")
            if claim and ("PersistentVolumeClaim", claim) not in named:
                problems.append(f"{where}: claim {claim} does not exist")
            volumes.add(volume["name"])
        for container in containers(doc):
            for mount in container.get("volumeMounts", []):
                if mount["name"] not in volumes:
                    problems.append(f"{where}: mounts unknown volume {mount['name']}")
            for source in container.get("envFrom", []):
                ref = source.get("configMapRef", {}).get("name")
                if ref and ("ConfigMap", ref) not in named:
                    problems.append(f"{where}: envFrom unknown ConfigMap {ref}")
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["key"] not in secrets.get(ref["name"], set()):
                    problems.append(f"{where}: {env['name']} reads unknown secret key")
    pod_labels = [template_labels(doc) for doc in workloads]
    for doc in docs:
        kind, name = doc.get("kind"), doc.get("metadata", {}).get("name")
        if kind == "Service":
            selector = doc["spec"].get("selector", {})
            if not any(selector.items() <= labels.items() for labels in pod_labels):
                problems.append(f"Service {name} selects no pods")
        if kind == "HorizontalPodAutoscaler":
            target = doc["spec"]["scaleTargetRef"]
            if (target["kind"], target["name"]) not in named:
                problems.append(f"HPA {name} scales unknown {target['kind']} {target['name']}")
        if kind == "Ingress":
            for rule in doc["spec"]["rules"]:
                for path in rule["http"]["paths"]:
                    backend = path["backend"]["service"]
                    service = named.get(("Service", backend["name"]))
                    ports = {p.get("name") for p in service["spec"]["ports"]} if service else set()
                    if backend["port"].get("name") not in ports:
                        problems.append(f"Ingress {name} routes to unknown {backend}")
    return problems


def secret_example() -> dict[str, set[str]]:
    """Secret name -> keys, from the example operators copy (not applied by kustomize)."""
    (secret,) = yaml_docs(K8S / "secret.example.yaml")
    return {secret["metadata"]["name"]: set(secret["stringData"])}


# --- Dockerfiles ------------------------------------------------------------------------------


def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def dockerfile_exec_forms(path: Path) -> Iterator[tuple[str, list[str]]]:
    for instruction, rest in dockerfile_instructions(path):
        if instruction in {"CMD", "ENTRYPOINT"}:
            yield instruction, yaml.safe_load(rest)


def copy_sources(path: Path) -> list[str]:
    """Paths a Dockerfile copies from the build context (not from other stages)."""
    sources = []
    for instruction, rest in dockerfile_instructions(path):
        if instruction != "COPY":
            continue
        words = [w for w in rest.split() if not w.startswith("--")]
        if not any(w.startswith("--from") for w in rest.split()):
            sources += words[:-1]
    return sources


def dockerfile_problems(dockerfile: Path, root: Path = ROOT) -> list[str]:
    """COPY sources missing from the repo or kept out of the context, packages not copied."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {
        p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]
    }
    sources = [s.rstrip("/") for s in copy_sources(dockerfile)]
    # BuildKit reads the Dockerfile's own ignore file; ours are allow-lists of "!path" lines.
    ignore = Path(f"{dockerfile}.dockerignore")
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    allowed = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    return [
        *(
            f"{dockerfile.name} copies {s}, which does not exist"
            for s in sources
            if not (root / s).exists()
        ),
        *(f"{dockerfile.name} does not copy package {p}" for p in sorted(packages - set(sources))),
        *(f"{ignore.name} keeps {s} out of the context" for s in sources if s not in allowed),
    ]


def arg_default(path: Path, name: str) -> str:
    for instruction, rest in dockerfile_instructions(path):
        if instruction == "ARG" and rest.startswith(f"{name}="):
            return rest.split("=", 1)[1]
    raise AssertionError(f"{path.name} has no ARG {name}")


# === the tests ===============================================================================


def test_compose_has_the_expected_services_and_valid_references() -> None:
    doc = compose()
    assert set(doc["services"]) == EXPECTED_SERVICES
    assert compose_problems(doc) == []


def test_compose_secrets_are_all_written_by_make_secrets() -> None:
    script = (DEPLOY / "compose" / "make-secrets.sh").read_text()
    missing = [name for name in compose()["secrets"] if not re.search(rf"\b{name}\b", script)]
    assert missing == []


def test_compose_gives_least_privilege_where_it_matters() -> None:
    services = compose()["services"]

    def holders(secret: str) -> set[str]:
        return {name for name, service in services.items() if secret in service.get("secrets", [])}

    assert holders("evoplane_migrate_database_url") == {"migrate"}  # schema changes
    assert holders("evoplane_admin_token") == {"api"}
    assert holders("evoplane_seal_key") == {"gateway", "gpu-worker"}
    for name in ("api", "mlflow", "temporal-ui"):  # admin surfaces stay on the host
        assert all(str(port).startswith("127.0.0.1:") for port in services[name]["ports"])


def test_compose_gateways_scale_behind_a_session_affine_balancer() -> None:
    services = compose()["services"]
    gateway = services["gateway"]
    assert "replicas" in gateway["deploy"]
    # The spool the gateway really uses lies inside the per-replica anonymous volume.
    settings = Settings(data_dir=Path(compose_env()["EVOPLANE_DATA_DIR"]), database_url="x")
    (volume,) = gateway["volumes"]
    assert ":" not in volume and gateway_config(settings).spool_dir.is_relative_to(volume)
    nginx = (DEPLOY / "compose" / "nginx" / "nginx.conf").read_text()
    assert re.search(r"map \$http_x_session_id \$(\w+)", nginx)
    assert re.search(r"hash \$\w+ consistent;", nginx)
    upstreams = re.findall(r"^\s*server ([\w-]+):(\d+);", nginx, re.MULTILINE)
    assert upstreams == [("gateway", str(Settings.model_fields["gateway_port"].default))]
    assert services["lb"]["depends_on"]["gateway"]["condition"] == "service_healthy"


def test_compose_gpu_services_reserve_gpus() -> None:
    services = compose()["services"]
    for name in ("gpu-worker", "sglang"):
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert any("gpu" in device["capabilities"] for device in devices), name
        assert services[name]["profiles"] == ["gpu"]
    assert services["gpu-worker"]["command"] == ["evoplane", "worker", "--gpu"]


def test_compose_temporal_ui_opens_on_the_namespace_evoplane_uses() -> None:
    ui = compose()["services"]["temporal-ui"]["environment"]
    assert ui["TEMPORAL_DEFAULT_NAMESPACE"] == compose_env()["EVOPLANE_TEMPORAL_NAMESPACE"]


def test_every_evoplane_command_in_configs_is_a_real_cli_command() -> None:
    commands = [*structured_commands(), *text_commands()]
    assert len(commands) >= 10
    problems = [f"{where}: {p}" for where, argv in commands for p in cli_problems(argv)]
    assert problems == []


def test_every_evoplane_variable_in_deploy_is_a_setting() -> None:
    unknown = {
        str(path.relative_to(ROOT)): sorted(found)
        for path in deploy_text_files()
        if (found := unknown_evoplane_vars(path.read_text(errors="replace")))
    }
    assert unknown == {}


def test_kustomization_lists_every_manifest_and_only_existing_files() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert all((K8S / name).is_file() for name in listed)
    present = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml", "secret.example.yaml"}
    assert present == listed


def test_k8s_manifests_have_the_expected_objects_and_valid_references() -> None:
    docs = k8s_docs()
    assert EXPECTED_K8S <= {(doc["kind"], doc["metadata"]["name"]) for doc in docs}
    assert k8s_problems(docs, secret_example()) == []


def test_k8s_images_and_gpus() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    images = {image["name"] for image in kustomization["images"]}
    docs = {(doc["kind"], doc["metadata"]["name"]): doc for doc in k8s_docs()}
    for doc in docs.values():
        for container in containers(doc):
            if container["image"].startswith("evoplane"):
                assert container["image"] in images
    for key in (("Deployment", "evoplane-gpu-worker"), ("StatefulSet", "evoplane-sglang")):
        (container,) = containers(docs[key])
        assert container["resources"]["limits"]["nvidia.com/gpu"] >= 1
    migrate = containers(docs[("Job", "evoplane-migrate")])[0]
    assert migrate["args"] == ["evoplane", "db", "upgrade"]


def test_external_values_point_at_the_same_namespace_and_databases() -> None:
    (config,) = [d for d in k8s_docs() if d["kind"] == "ConfigMap"]
    temporal = yaml.safe_load((K8S / "external" / "temporal.values.yaml").read_text())
    namespaces = temporal["server"]["config"]["namespaces"]["namespace"]
    assert config["data"]["EVOPLANE_TEMPORAL_NAMESPACE"] in {ns["name"] for ns in namespaces}
    stores = temporal["server"]["config"]["persistence"]["datastores"]
    assert {s["sql"]["databaseName"] for s in stores.values()} == {
        "temporal",
        "temporal_visibility",
    }
    pg = yaml_docs(K8S / "external" / "postgres.cnpg.yaml")
    databases = {d["spec"]["name"] for d in pg if d["kind"] == "Database"}
    assert {"temporal", "temporal_visibility", "mlflow"} <= databases


def test_dockerfiles_copy_only_existing_files_and_every_package() -> None:
    for dockerfile in DOCKERFILES.values():
        assert dockerfile_problems(dockerfile) == []


def test_dockerfiles_build_the_images_the_deployment_needs() -> None:
    cpu, gpu = DOCKERFILES["cpu"], DOCKERFILES["gpu"]
    assert arg_default(cpu, "PYTHON_IMAGE") == "python:3.11-slim"
    assert set(arg_default(cpu, "EXTRAS").split(",")) >= {"dspy", "train"}
    assert "--constraint constraints/cpu.txt" in cpu.read_text()
    assert "nvidia/cuda" in arg_default(gpu, "CUDA_IMAGE")
    assert set(arg_default(gpu, "EXTRAS").split(",")) >= {"train", "gpu"}
    assert "python3.12 -m venv" in gpu.read_text()
    for dockerfile in DOCKERFILES.values():
        users = [
            rest
            for instruction, rest in dockerfile_instructions(dockerfile)
            if instruction == "USER"
        ]
        assert users and users[-1].split(":")[0] not in {"0", "root"}
        assert ("ENTRYPOINT", ["evoplane-entrypoint"]) in dockerfile_exec_forms(dockerfile)


def test_temporal_setup_registers_the_search_attributes_of_the_workflows() -> None:
    spec = importlib.util.spec_from_file_location("temporal_setup", DOCKER / "temporal_setup.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wanted = module.search_attribute_types()
    assert set(wanted) == {"Agent", "Tenant", "Action", "Stage", "Outcome"}
    assert wanted == {key.name: key.indexed_value_type.value for key in SEARCH_ATTRIBUTES}
    # Compose and the Kubernetes Job run it from the CPU image, where the Dockerfile puts it.
    assert compose()["services"]["temporal-setup"]["command"][0] == "evoplane-temporal-setup"
    (job,) = [d for d in k8s_docs() if d["metadata"]["name"] == "evoplane-temporal-setup"]
    assert containers(job)[0]["args"][0] == "evoplane-temporal-setup"
    copies = [rest for op, rest in dockerfile_instructions(DOCKERFILES["cpu"]) if op == "COPY"]
    assert any(
        c.endswith("temporal_setup.py /usr/local/bin/evoplane-temporal-setup") for c in copies
    )


# --- the scripts operators run ----------------------------------------------------------------

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def run_entrypoint(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EVOPLANE_", "MLFLOW_"))}
    return subprocess.run(
        ["bash", str(DOCKER / "entrypoint.sh"), "env"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=30,
    )


@needs_bash
def test_entrypoint_turns_secret_files_into_settings(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("evpadm_abc\n")
    (tmp_path / "empty").write_text("")
    result = run_entrypoint(
        {
            "EVOPLANE_ADMIN_TOKEN_FILE": str(tmp_path / "token"),
            "EVOPLANE_UPSTREAM_API_KEY_FILE": str(tmp_path / "empty"),
            "MLFLOW_BACKEND_STORE_URI_FILE": str(tmp_path / "token"),
        }
    )
    assert result.returncode == 0, result.stderr
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line)
    assert env["EVOPLANE_ADMIN_TOKEN"] == "evpadm_abc"
    assert env["MLFLOW_BACKEND_STORE_URI"] == "evpadm_abc"
    assert "EVOPLANE_UPSTREAM_API_KEY" not in env  # an empty secret sets nothing
    assert not [name for name in env if name.endswith("_FILE") and name.startswith("EVOPLANE_")]


@needs_bash
def test_entrypoint_refuses_a_setting_given_twice_or_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("a")
    twice = run_entrypoint(
        {"EVOPLANE_ADMIN_TOKEN": "b", "EVOPLANE_ADMIN_TOKEN_FILE": str(tmp_path / "token")}
    )
    assert twice.returncode != 0 and "keep one" in twice.stderr
    missing = run_entrypoint({"EVOPLANE_SEAL_KEY_FILE": str(tmp_path / "absent")})
    assert missing.returncode != 0 and "missing" in missing.stderr


@needs_bash
def test_make_secrets_writes_every_compose_secret_once(tmp_path: Path) -> None:
    from cryptography.fernet import Fernet
    from sqlalchemy.engine import make_url

    script = tmp_path / "compose" / "make-secrets.sh"
    script.parent.mkdir()
    shutil.copy(DEPLOY / "compose" / "make-secrets.sh", script)
    first = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert first.returncode == 0, first.stderr
    secrets = script.parent / "secrets"
    assert {p.name for p in secrets.iterdir()} == set(compose()["secrets"])
    assert oct(secrets.stat().st_mode)[-3:] == "700"
    Fernet((secrets / "evoplane_seal_key").read_text().strip())  # a valid key
    users = {
        name: make_url((secrets / name).read_text().strip()).username
        for name in ("evoplane_migrate_database_url", "evoplane_database_url")
    }
    assert users == {
        "evoplane_migrate_database_url": "evoplane_owner",
        "evoplane_database_url": "evoplane_app",
    }
    before = (secrets / "postgres_password").read_text()
    again = subprocess.run(["sh", str(script)], capture_output=True, text=True, timeout=30)
    assert again.returncode == 0 and "kept" in again.stdout
    assert (secrets / "postgres_password").read_text() == before


# --- the checkers catch what they are for -----------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["workr"], ["db", "upgrad"], ["worker", "--gpus"], ["db"], ["gateway", "--prot", "1"]],
)
def test_cli_check_catches_a_misspelt_command(argv: list[str]) -> None:
    assert cli_problems(argv)


def test_text_scan_finds_commands_and_ignores_other_evoplanes() -> None:
    text = (
        "docker compose exec api evoplane workr\n"
        "kubectl -n evoplane exec deploy/evoplane-api -- evoplane db upgrade\n"
        '--from-literal=seal-key="$(evoplane key seal-key)"\n'
        "# `evoplane worker --gpu` serves both queues, see evoplane/settings.py\n"
        "EVOPLANE_DATABASE_URL=x evoplane gc\n"
    )
    found = commands_in_text(text, {"api"})
    assert found == [["workr"], ["db", "upgrade"], ["key", "seal-key"], ["worker", "--gpu"], ["gc"]]
    assert [argv for argv in found if cli_problems(argv)] == [["workr"]]


def test_env_check_catches_an_unknown_setting() -> None:
    assert unknown_evoplane_vars("EVOPLANE_DATABASE_URL=x EVOPLANE_DATABASE_URI=y") == {
        "EVOPLANE_DATABASE_URI"
    }


def test_compose_check_catches_dangling_references() -> None:
    doc = copy.deepcopy(compose())
    services = doc["services"]
    services["api"]["depends_on"]["migrat"] = {"condition": "service_completed_successfully"}
    services["gateway"]["secrets"].append("evoplane_sealkey")
    services["mlflow"]["volumes"].append("mlflow-artefacts:/x")
    services["worker"]["depends_on"]["sglang"] = {"condition": "service_healthy"}
    del services["migrate"]["restart"]
    problems = "\n".join(compose_problems(doc))
    for expected in ("unknown service migrat", "evoplane_sealkey", "mlflow-artefacts"):
        assert expected in problems
    assert "has a profile" in problems and "not one-shot" in problems


def test_k8s_check_catches_dangling_references() -> None:
    docs = copy.deepcopy(k8s_docs())
    for doc in docs:
        if (doc["kind"], doc["metadata"]["name"]) == ("Service", "evoplane-api"):
            doc["spec"]["selector"]["app.kubernetes.io/component"] = "apii"
        if doc["kind"] == "HorizontalPodAutoscaler":
            doc["spec"]["scaleTargetRef"]["kind"] = "Deployment"
    secrets = {name: keys - {"admin-token"} for name, keys in secret_example().items()}
    problems = "\n".join(k8s_problems(docs, secrets))
    assert "Service evoplane-api selects no pods" in problems
    assert "HPA evoplane-gateway scales unknown Deployment" in problems
    assert "EVOPLANE_ADMIN_TOKEN reads unknown secret key" in problems


def test_dockerfile_check_catches_a_missing_file_and_a_forgotten_package(tmp_path: Path) -> None:
    dockerfile = tmp_path / "broken.Dockerfile"
    dockerfile.write_text("FROM python:3.11-slim\nCOPY atdp/ atdp/\nCOPY nowhere/ nowhere/\n")
    Path(f"{dockerfile}.dockerignore").write_text("**\n!atdp/\n")
    problems = "\n".join(dockerfile_problems(dockerfile))
    assert "copies nowhere, which does not exist" in problems
    assert "does not copy package registry" in problems
    assert "keeps nowhere out of the context" in problems
