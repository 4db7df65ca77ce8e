"""The structure holds: packages import only downwards, no modules import each other in a
circle, and the control plane's plain functions stay free of Temporal and of registry I/O."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A package imports only packages on lower floors (the layout in docs/architecture.md): never
# one above, nor one beside it. The registry and the shared runtimes both stand on the
# protocol alone; the gateway and the control plane both stand on them, and what both need
# lives below them, so neither imports the other.
FLOORS = {
    "atdp": 1,
    "registry": 2,
    "runtime": 2,
    "evolution": 3,
    "proxy": 3,
    "activities": 4,
    "workflows": 5,
    "evoplane": 6,
    "benchmarks": 7,
}


# What the control plane's plain functions may take from the registry: the values its
# readers return and pure helpers over them. Never a session, nor a function that reads or
# writes with one: activities load the evidence and pass it in (docs/architecture.md).
REGISTRY_VALUES = frozenset(
    {
        "AgentVersion",
        "AliasMove",
        "AliasState",
        "ConversationTurn",
        "EvaluationCase",
        "EvaluationSet",
        "EvolutionRecord",
        "LlmUsage",
        "McpServer",
        "MemoryItem",
        "MemoryStatus",
        "ReviewDraft",
        "ReviewItem",
        "ReviewKind",
        "ToolCallRecord",
        "TrajectoryWindow",
        "UserTurn",
        "WindowTrajectory",
        "effective_reward",
        "memory_key",
    }
)
DATABASE_LIBRARIES = frozenset({"sqlalchemy", "sqlmodel"})


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {
        module_name(path): path
        for package in FLOORS
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    }


def imported(path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `path` imports, anywhere in it (lazy imports too)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path.parent)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found |= {f"{base}.{alias.name}" for alias in node.names}
    return {name for name in found if name in modules}


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imported(path, modules) - {name} for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package(module: str) -> str:
    return module.split(".")[0]


def test_packages_import_only_downwards() -> None:
    not_down = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        for target in targets
        if package(target) != package(source) and FLOORS[package(target)] >= FLOORS[package(source)]
    )
    assert not_down == []


def test_the_gateway_and_the_control_plane_never_import_each_other() -> None:
    across = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        for target in targets
        if {package(source), package(target)} == {"proxy", "evolution"}
    )
    assert across == []


def test_the_shared_runtimes_import_only_the_protocol() -> None:
    beyond = sorted(
        f"{source} -> {target}"
        for source, targets in import_graph().items()
        if package(source) == "runtime"
        for target in targets
        if package(target) not in {"runtime", "atdp"}
    )
    assert beyond == []


def test_no_modules_import_each_other_in_a_circle() -> None:
    # A package's __init__ re-exporting its own modules is not a circle of concepts.
    graph = {
        source: {t for t in targets if not source.startswith(f"{t}.")}
        for source, targets in import_graph().items()
    }
    assert circles(graph) == []


def test_the_plain_functions_never_import_temporal() -> None:
    touching = sorted(
        module_name(path)
        for path in (ROOT / "evolution").rglob("*.py")
        if "temporalio" in path.read_text()
    )
    assert touching == []


def registry_uses(path: Path) -> list[str]:
    """What `path` takes from the registry or a database library that a plain function
    may not: a name beyond REGISTRY_VALUES, a whole module, a database library."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [
                alias.name
                for alias in node.names
                if alias.name.split(".")[0] in DATABASE_LIBRARIES | {"registry"}
            ]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            top = node.module.split(".")[0]
            if top in DATABASE_LIBRARIES:
                found.append(node.module)
            elif top == "registry":
                found += [
                    f"{node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name not in REGISTRY_VALUES
                ]
    return found


def test_the_plain_functions_take_values_not_a_registry_session() -> None:
    reaching = sorted(
        f"{module_name(path)} -> {name}"
        for path in (ROOT / "evolution").rglob("*.py")
        for name in registry_uses(path)
    )
    assert reaching == []


def test_the_registry_values_the_plain_functions_take_are_not_readers() -> None:
    """No name on REGISTRY_VALUES is a registry function with a session parameter."""
    readers = sorted(
        f"{module_name(path)}.{node.name}"
        for path in (ROOT / "registry").rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name in REGISTRY_VALUES
        and any(
            arg.annotation is not None and "Session" in ast.unparse(arg.annotation)
            for arg in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        )
    )
    assert readers == []


def test_the_registry_check_finds_a_session(tmp_path: Path) -> None:
    plain = tmp_path / "plain.py"
    plain.write_text(
        "from registry import Session, WindowTrajectory, window_rewards\n"
        "from registry.memory import memory_key\n"
        "import sqlalchemy as sa\n"
        "from sqlmodel import select\n"
    )
    assert registry_uses(plain) == [
        "registry.Session",
        "registry.window_rewards",
        "sqlalchemy",
        "sqlmodel",
    ]


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
