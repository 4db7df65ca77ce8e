"""Validating a tool's recorded calls against a schema, with its argument map.

Each call's arguments are validated (JSON Schema 2020-12, formats checked) as the model
would have had to write them, so a candidate is compared with the schema the model was
offered on the same calls: the tool-schema operator's proof of an edit (the "replay" of
its evidence; no model answers, unlike the replay gate's `evolution.replay`). Where the
rule was learned from refusals, a simulator built from them says which refused calls the
tool's own words call wrong and which examples it must accept, and the candidate is judged
against that.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import jsonschema

from evolution.operators import OperatorError
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.rules import claims, example_of
from evolution.tool_schema.statement import Statement

__all__ = ["CallValidation", "RefusalJudgement", "RefusalSimulator", "validate_calls", "validator"]


@dataclass(frozen=True)
class CallValidation:
    """How a schema (with its argument map) judges the recorded calls."""

    successes_valid: int
    failures_rejected: int
    accepted_successes: frozenset[int]
    rejected_failures: frozenset[int]


def validator(schema: dict) -> jsonschema.protocols.Validator:
    """A 2020-12 validator that checks formats; OperatorError when the schema is invalid."""
    cls = jsonschema.Draft202012Validator
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        raise OperatorError(f"the tool schema is not valid JSON Schema: {error.message}") from error
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def validate_calls(
    schema: dict,
    argument_map: dict[str, str],
    successes: list[RecordedCall],
    failures: list[RecordedCall],
) -> CallValidation:
    """Validate each call's arguments as the model would have had to write them."""
    check = validator(schema)
    to_model = {agent: model for model, agent in argument_map.items()}

    def valid(call: RecordedCall) -> bool:
        if call.arguments is None:
            return False
        renamed = {to_model.get(key, key): value for key, value in call.arguments.items()}
        return check.is_valid(renamed)

    accepted = frozenset(i for i, call in enumerate(successes) if valid(call))
    rejected = frozenset(i for i, call in enumerate(failures) if not valid(call))
    return CallValidation(len(accepted), len(rejected), accepted, rejected)


@dataclass(frozen=True)
class RefusalJudgement:
    """How a candidate judges what the refusals say.

    Args:
        said_wrong: refused calls the tool's words call wrong.
        rejected: how many of those the candidate rejects.
        examples: the examples the tool gave.
        examples_accepted: how many of those the candidate accepts.
        allowed: values each thing the tool said allows (a date layout's sample, a value
            made from each stated pattern, the first of each stated set).
        allowed_accepted: how many of those the candidate accepts; fewer means the tool's
            words contradict each other, or the candidate.
        unexplained: refused calls the tool's words do not call wrong (refused for
            another reason, such as an id that is well-formed but unknown).
    """

    said_wrong: int
    rejected: int
    examples: int
    examples_accepted: int
    allowed: int
    allowed_accepted: int
    unexplained: int

    @property
    def separates(self) -> bool:
        """Every call the words call wrong is rejected, every value they allow accepted."""
        rejects_all = self.said_wrong > 0 and self.rejected == self.said_wrong
        accepts_all = self.allowed_accepted == self.allowed
        return rejects_all and accepts_all and self.examples_accepted == self.examples


@dataclass(frozen=True)
class RefusalSimulator:
    """The tool as its recorded refusals describe it.

    A refused call is wrong by the tool's words when its value breaks what its own error
    says (or, where its error says nothing about the value, what the evidence says as a
    whole), when its error quotes the value as wrong, when it used a name the tool says it
    does not know, or when it lacked the parameter the tool says it requires.

    Args:
        failures: the cluster's refused calls.
        statements: what each one's error says, in the same order.
        evidence: what the refusals (or, failing them, the description) say together.
        parameters: the agent's names the value may come under.
        unknown: the agent's names the tool says it does not know.
        required: the tool says the parameter is required.
        examples: the examples the tool gave.
    """

    failures: Sequence[RecordedCall]
    statements: Sequence[Statement]
    evidence: Statement
    parameters: tuple[str, ...]
    unknown: frozenset[str] = frozenset()
    required: bool = False
    examples: tuple[str, ...] = ()

    @cached_property
    def said_wrong(self) -> frozenset[int]:
        """The refused calls (by index) the tool's words call wrong."""
        pairs = zip(self.failures, self.statements, strict=True)
        return frozenset(i for i, (call, own) in enumerate(pairs) if self._wrong(call, own))

    def judge(self, schema: dict, model_name: str, after: CallValidation) -> RefusalJudgement:
        """How `schema` (whose parameter is `model_name`) does against the tool's words;
        `after` is its validation of the same recorded calls."""
        prop = validator(schema.get("properties", {}).get(model_name, {}))
        return RefusalJudgement(
            said_wrong=len(self.said_wrong),
            rejected=len(self.said_wrong & after.rejected_failures),
            examples=len(self.examples),
            examples_accepted=sum(prop.is_valid(example) for example in self.examples),
            allowed=len(self.allowed),
            allowed_accepted=sum(prop.is_valid(value) for value in self.allowed),
            unexplained=len(self.failures) - len(self.said_wrong),
        )

    @cached_property
    def allowed(self) -> tuple[object, ...]:
        """A value each thing the evidence says allows: its layouts' samples, and a value
        made from each stated claim (where one can be made)."""
        made = (example_of(claim) for claim in claims(self.evidence))
        values = [*self.evidence.samples, *(value for value in made if value is not None)]
        return tuple({json.dumps(v, sort_keys=True): v for v in values}.values())

    def _wrong(self, call: RecordedCall, own: Statement) -> bool:
        arguments = call.arguments or {}
        if self.unknown & set(arguments):
            return True
        given = [arguments[name] for name in self.parameters if name in arguments]
        if not given:
            return self.required
        if any(given[0] == refused for refused in own.refused):
            return True
        stated = own if own.states_a_rule else self.evidence
        return any(not validator(claim).is_valid(given[0]) for claim in claims(stated))
