"""MkDocs hooks: the control API and CLI reference pages, generated from the code at build time.

mkdocs.yml names this file under `hooks:`. The control API's page is rendered from its OpenAPI
document (the app is built in process, never served: no Temporal, no database is reached); the
CLI's page is each command's own `--help`. Neither needs the network or a running service, and
neither is checked in, so neither can go stale.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

__all__ = ["cli_page", "control_api_page", "on_files"]

CONTROL_API_PAGE = "reference/control-api.md"
CLI_PAGE = "reference/cli.md"
HELP_COLUMNS = "80"  # the width --help is rendered at, whatever the terminal building the docs
HTTP_METHODS = ("get", "post", "put", "patch", "delete")
# "name: words" or "name, other: words", as an `Args:` section of a docstring lists fields.
ARG_ENTRY = re.compile(r"(?P<names>\w+(?:, \w+)*): (?P<text>.*)")


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated reference pages to the site (mkdocs.yml's nav names them)."""
    files.append(File.generated(config, CONTROL_API_PAGE, content=control_api_page()))
    files.append(File.generated(config, CLI_PAGE, content=cli_page()))
    return files


# --- the control API, from its OpenAPI document ----------------------------------------------


def control_api_spec() -> dict[str, Any]:
    """The control API's OpenAPI document, from the app itself (its lifespan never runs)."""
    from sqlalchemy import create_engine

    from evoplane.control.app import create_control_app
    from evoplane.control.config import ControlConfig

    config = ControlConfig(engine=create_engine("sqlite://"), admin_token="docs")
    return create_control_app(config).openapi()


def control_api_page(spec: dict[str, Any] | None = None) -> str:
    """Markdown: every operation by tag (method, path, summary, parameters, bodies)."""
    spec = spec or control_api_spec()
    lines = [
        f"# {spec['info']['title']} reference",
        "",
        "Generated from the API's OpenAPI document when the docs are built (`docs/hooks.py`);",
        "a running API serves the same document at `/openapi.json`, and Swagger UI at `/docs`.",
        "",
        _cell(spec["info"].get("description", "")),
        "",
    ]
    operations = [
        (path, method, operation)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
        if method in HTTP_METHODS
    ]
    for tag in spec.get("tags", []):
        tagged = [op for op in operations if tag["name"] in op[2].get("tags", [])]
        lines += [f"## {tag['name']}", "", tag.get("description", ""), ""]
        for path, method, operation in tagged:
            lines += _operation(path, method, operation)
    lines += _schemas(spec.get("components", {}).get("schemas", {}))
    return "\n".join(lines).rstrip() + "\n"


def _operation(path: str, method: str, operation: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", "", operation.get("summary", ""), ""]
    description = operation.get("description", "")
    rest = description.split("\n\n", 1)[1].strip() if "\n\n" in description else ""
    if rest:
        lines += [rest, ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            lines.append(
                f"| `{parameter['name']}` | {parameter['in']} | {_type(schema)} "
                f"| {'yes' if parameter.get('required') else 'no'} "
                f"| {_cell(parameter.get('description') or schema.get('description', ''))} |"
            )
        lines.append("")
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body:
        lines += [f"Body: {_type(body.get('schema', {}))}", ""]
    answers = [
        f"{status} {_type(content['application/json'].get('schema', {}))}"
        for status, response in operation.get("responses", {}).items()
        if (content := response.get("content", {})) and "application/json" in content
    ]
    if answers:
        lines += [f"Responses: {'; '.join(answers)}", ""]
    return lines


def _schemas(schemas: dict[str, Any]) -> list[str]:
    lines = ["## Schemas", ""]
    for name, schema in sorted(schemas.items()):
        summary, fields = _docstring(schema.get("description", ""))
        lines += [f"### {name}", "", summary, ""]
        properties = schema.get("properties", {})
        if not properties:
            if "enum" in schema:
                lines += ["One of " + ", ".join(f"`{v}`" for v in schema["enum"]) + ".", ""]
            continue
        required = set(schema.get("required", []))
        lines += ["| field | type | default | description |", "|---|---|---|---|"]
        for field, spec in properties.items():
            about = spec.get("description") or fields.get(field, "")
            default = "required" if field in required else _default(spec)
            lines.append(f"| `{field}` | {_type(spec)} | {default} | {_cell(about)} |")
        lines.append("")
    return lines


def _docstring(text: str) -> tuple[str, dict[str, str]]:
    """A model's docstring: its text, and each field's words from its `Args:` section."""
    head, _, args = text.partition("Args:\n")
    fields: dict[str, str] = {}
    names: list[str] = []
    indent = min((len(x) - len(x.lstrip()) for x in args.splitlines() if x.strip()), default=0)
    for line in args.splitlines():
        entry = ARG_ENTRY.match(line[indent:]) if len(line) - len(line.lstrip()) == indent else None
        if entry:
            names = [n.strip() for n in entry["names"].split(",")]
            for field in names:
                fields[field] = entry["text"]
        elif line.strip():
            for field in names:
                fields[field] += " " + line.strip()
    return _cell(head), fields


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a named schema links to its entry below."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(_type(option) for option in schema[key])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_type(schema['additionalProperties'])}"
    return f"{kind} ({schema['format']})" if "format" in schema else kind


def _default(schema: dict[str, Any]) -> str:
    if "default" not in schema:
        return ""
    return f"`{_cell(json.dumps(schema['default'], ensure_ascii=False))}`"


def _cell(text: str) -> str:
    """Text on one line, safe inside a Markdown table."""
    return " ".join(str(text).split()).replace("|", "\\|")


# --- the CLI, from its own --help -------------------------------------------------------------


def cli_page() -> str:
    """Markdown: each `evoplane` command's --help, in the order the CLI lists them."""
    import typer.main

    from evoplane.cli import app

    lines = [
        "# CLI reference",
        "",
        "Each command's `--help`, generated from the CLI itself when the docs are built",
        "(`docs/hooks.py`).",
        "",
    ]
    for path in _command_paths(typer.main.get_command(app), ["evoplane"]):
        lines += [f"## `{' '.join(path)}`", "", "```text", _help(app, path[1:]), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def _command_paths(command: Any, path: list[str]) -> list[list[str]]:
    """The path of every command under `command`, itself first, groups before their members."""
    paths = [path]
    for name, sub in getattr(command, "commands", {}).items():
        if not getattr(sub, "hidden", False):
            paths += _command_paths(sub, [*path, name])
    return paths


def _help(app: Any, args: list[str]) -> str:
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": HELP_COLUMNS})
    if result.exit_code != 0:
        raise RuntimeError(f"evoplane {' '.join(args)} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")
