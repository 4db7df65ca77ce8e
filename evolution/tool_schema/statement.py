"""What a text says one parameter must be: a `Statement`, and the names that scope it."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, fields

__all__ = ["Names", "Statement", "merged"]


@dataclass(frozen=True)
class Names:
    """The names one parameter goes by (the agent's, the model's) and its siblings' names,
    so a sentence about another parameter is not read as one about this one."""

    ours: frozenset[str]
    others: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Statement:
    """What one text says about a parameter. Tuples keep the order things were said in;
    a merged statement lists the most often said first.

    Args:
        patterns: regular expressions the value must match.
        enums: closed sets the value must come from.
        formats: JSON Schema formats ("date", "email", "uuid").
        types: JSON types ("integer", "string").
        examples: values the text gives as right.
        samples: values made from a stated layout ("YYYY-MM-DD" -> "2026-01-31"), not given.
        refused: values the text quotes as wrong.
        unknown: parameter names the tool says it does not know.
        missing: parameter names the tool says it requires (or suggests instead).
    """

    patterns: tuple[str, ...] = ()
    enums: tuple[tuple, ...] = ()
    formats: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    samples: tuple[str, ...] = ()
    refused: tuple = ()
    unknown: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def states_a_rule(self) -> bool:
        """It says something about the value itself (not only about names)."""
        return bool(self.patterns or self.enums or self.formats or self.types or self.examples)

    @property
    def says_anything(self) -> bool:
        return self.states_a_rule or bool(self.unknown or self.missing)


def merged(statements: Iterable[Statement]) -> Statement:
    """One statement holding everything the statements say, the most often said first."""
    items = list(statements)
    return Statement(**{f.name: _by_frequency(items, f.name) for f in fields(Statement)})


def _by_frequency(statements: list[Statement], name: str) -> tuple:
    counts: Counter[str] = Counter()
    values: dict[str, object] = {}
    for statement in statements:
        for value in dict.fromkeys(json.dumps(v) for v in getattr(statement, name)):
            counts[value] += 1
            values.setdefault(value, json.loads(value))
    order = sorted(counts, key=lambda key: -counts[key])  # stable: first said wins ties
    return tuple(_frozen(values[key]) for key in order)


def _frozen(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value
