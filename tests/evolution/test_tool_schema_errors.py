"""Learning a parameter's rule from a tool's refusals alone, on generated formats and phrasings.

For generated formats (an id of prefix and digits, a date in one of several layouts, a
closed set of words) and parameter names, refusals are written the ways tools write them:
plain sentences of several shapes, jsonschema's and pydantic's own messages (produced by
really validating the refused value), FastAPI's 422 body, `{"error": {...}}` and
`{"errors": [...]}` JSON. The rule the refusal learner proposes, with no successful call to
learn from, must accept fresh right values and reject every refused one.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import date
from typing import Literal

import jsonschema
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import Field, ValidationError, create_model

from atdp import ToolOverride
from evolution.operators import OperatorError
from evolution.tool_schema.calls import RecordedCall
from evolution.tool_schema.config import ToolSchemaConfig
from evolution.tool_schema.edits import OfferedTool, Target
from evolution.tool_schema.errors import read_refusal
from evolution.tool_schema.refusals import edit_from_refusals
from evolution.tool_schema.statement import Names
from evolution.tool_schema.validation import validate_calls
from registry import ToolCallRecord

# Words a refusal's own phrasing uses; a closed set made of them would be ambiguous to any
# reader ("must be one of: one, of"), so generated values avoid them.
PHRASING_WORDS = frozenset(
    """a an the one of any or and must be either should expected allowed values valid value
    like such as for example format pattern match invalid field required unknown type
    this that more others similar etc following below above in is not""".split()
)
words = st.from_regex(r"[a-z]{3,9}", fullmatch=True).filter(lambda w: w not in PHRASING_WORDS)
parameters = st.builds(lambda a, b: f"{a}_{b}", words, words)
SIBLING = "other_field"


# -- the learner on recorded refusals ---------------------------------------------------


def refused(parameter: str, value: object, said: str | dict) -> RecordedCall:
    """A refused call; `said` is the error message, or the JSON body the tool returned."""
    record = ToolCallRecord(
        event_id=uuid.uuid4(),
        trajectory_id=uuid.uuid4(),
        call_id="call",
        tool="some_tool",
        arguments=json.dumps({parameter: value}),
        success=False,
        error_class="validation_error",
        error_message=said if isinstance(said, str) else None,
        tool_return=said if isinstance(said, dict) else None,
    )
    return RecordedCall(record, {parameter: value})


def learned(parameter: str, refusals: list[tuple[object, str | dict]], **tool) -> dict:
    """The parameter's schema in the candidate learned from these refusals alone."""
    schema = tool.get("schema") or {
        "type": "object",
        "properties": {parameter: {"type": "string"}, SIBLING: {"type": "string"}},
    }
    offered = OfferedTool(ToolOverride(), schema, schema, tool.get("description"))
    failures = [refused(parameter, value, said) for value, said in refusals]
    before = validate_calls(schema, {}, [], failures)
    target = Target("some_tool", parameter, "validation_error")
    edit = edit_from_refusals(offered, target, [], failures, before, ToolSchemaConfig())
    return edit.schema["properties"][edit.model_name]


def accepts(prop: dict, value: object) -> bool:
    cls = jsonschema.Draft202012Validator
    return cls(prop, format_checker=cls.FORMAT_CHECKER).is_valid(value)


# -- refusals as validators write them --------------------------------------------------


def jsonschema_message(parameter: str, prop: dict, value: object, *, prefixed: bool) -> str:
    """jsonschema's own message for the value, as a tool that validates with it reports it."""
    cls = jsonschema.Draft202012Validator
    schema = {"type": "object", "properties": {parameter: prop}}
    validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    error = next(iter(validator.iter_errors({parameter: value})))
    return f"{parameter}: {error.message}" if prefixed else error.message


def fastapi_body(parameter: str, annotation: object, value: object) -> dict:
    """The 422 body FastAPI sends when its pydantic model refuses the value."""
    model = create_model("Body", **{parameter: annotation}, **{SIBLING: (str, "x")})
    with pytest.raises(ValidationError) as refused_by:
        model.model_validate({parameter: value})
    errors = json.loads(refused_by.value.json(include_url=False))
    return {"detail": [{**error, "loc": ["body", *error["loc"]]} for error in errors]}


def error_body(parameter: str, message: str) -> dict:
    return {"error": {"message": message, "param": parameter, "type": "invalid_request_error"}}


def errors_body(parameter: str, message: str) -> dict:
    """A list of field errors, one about a sibling saying something else entirely."""
    sibling = {"field": SIBLING, "message": "must be one of: north, south"}
    return {"errors": [sibling, {"field": parameter, "message": message}]}


# -- ids: a prefix, a separator, a fixed number of digits -------------------------------


@dataclass(frozen=True)
class IdFormat:
    prefix: str
    separator: str
    width: int

    def value(self, number: int) -> str:
        return f"{self.prefix}{self.separator}{number % 10**self.width:0{self.width}d}"

    @property
    def regex(self) -> str:
        return f"^{re.escape(self.prefix)}{re.escape(self.separator)}\\d{{{self.width}}}$"

    def wrong(self, number: int) -> list[str]:
        """Values of other shapes: the bare number, one digit more, the prefix in lower case."""
        bare = f"{number % 10**self.width:0{self.width}d}"
        longer = f"{self.prefix}{self.separator}{number:0{self.width + 1}d}"
        lower = f"{self.prefix.lower()}{self.separator}{bare}"
        return [bare, longer] + ([lower] if lower != self.value(number) else [])


id_formats = st.builds(
    IdFormat,
    prefix=st.from_regex(r"[A-Z][A-Za-z]{0,3}", fullmatch=True),
    separator=st.sampled_from("-_/#:."),
    width=st.integers(3, 8),
)
ID_PHRASINGS = [
    lambda p, f, bad, ex: f"{p} must match {f.regex}",
    lambda p, f, bad, ex: f"Invalid {p} '{bad}': expected pattern {f.regex}.",
    lambda p, f, bad, ex: f"{p} must look like {ex}",
    lambda p, f, bad, ex: f"{p}: invalid value, e.g. {ex}",
    lambda p, f, bad, ex: f"The {p} was refused. For example: '{ex}'",
    lambda p, f, bad, ex: f"{p} has the wrong format; use an id such as {ex}.",
    lambda p, f, bad, ex: jsonschema_message(p, {"pattern": f.regex}, bad, prefixed=True),
    lambda p, f, bad, ex: fastapi_body(p, (str, Field(pattern=f.regex)), bad),
    lambda p, f, bad, ex: error_body(p, f"Invalid value for '{p}'. Must match {f.regex}"),
    lambda p, f, bad, ex: errors_body(p, f"should be formatted like {ex}"),
]


@settings(max_examples=60)
# Prefixes whose letters also spell a date layout ("MMM", "YYMM") inside the stated regex.
@example("aaa_aaa", IdFormat("MMM", "-", 3), [0, 1], [0], 0)
@example("aaa_aaa", IdFormat("YYMM", "-", 3), [0, 1], [0], 8)
@example("aaa_aaa", IdFormat("Mss", "-", 3), [0, 1], [0], 1)  # and in the refused value
@given(
    parameter=parameters,
    fmt=id_formats,
    numbers=st.lists(st.integers(0, 10**9), min_size=2, max_size=5, unique=True),
    fresh=st.lists(st.integers(0, 10**9), min_size=1, max_size=5),
    phrasing=st.sampled_from(range(len(ID_PHRASINGS))),
)
def test_an_id_format_is_learned_from_refusals_in_any_phrasing(
    parameter: str, fmt: IdFormat, numbers: list[int], fresh: list[int], phrasing: int
) -> None:
    say = ID_PHRASINGS[phrasing]
    bad = [value for n in numbers for value in fmt.wrong(n)]
    example = fmt.value(numbers[0] + 1)

    prop = learned(parameter, [(value, say(parameter, fmt, value, example)) for value in bad])

    assert all(accepts(prop, fmt.value(n)) for n in fresh), prop
    assert not [value for value in bad if accepts(prop, value)], prop


def test_a_layout_is_read_outside_a_stated_regex_only() -> None:
    names = Names(frozenset({"ref"}), frozenset())
    inside = read_refusal(r"ref must match ^YYMM\-\d{3}$", None, names)
    beside = read_refusal(r"ref must match ^\d{4}$, i.e. YYMM", None, names)
    assert inside.patterns == (r"^YYMM\-\d{3}$",)
    assert beside.patterns == (r"^\d{4}$", r"^\d{2}\d{2}$")
    # A field named twice is a word, not a layout; so is a piece of a longer value.
    assert read_refusal("ref: expected format MMM-DD", None, names).patterns == ()
    assert read_refusal("invalid ref 'Mss-0001'", None, names).patterns == ()
    assert read_refusal("ref: use DD.MM.YYYY.", None, names).samples == ("31.01.2026",)


# -- dates in several layouts -----------------------------------------------------------

LAYOUTS = {
    "YYYY-MM-DD": "%Y-%m-%d",
    "DD.MM.YYYY": "%d.%m.%Y",
    "MM/DD/YYYY": "%m/%d/%Y",
    "YYYYMMDD": "%Y%m%d",
    "DD-MM-YYYY": "%d-%m-%Y",
    "YYYY/MM/DD": "%Y/%m/%d",
}


def layout_regex(layout: str) -> str:
    return "^" + re.sub(r"[YMD]+", lambda m: rf"\d{{{len(m.group(0))}}}", re.escape(layout)) + "$"


def date_refusal(p: str, layout: str, bad: str, example: str, phrasing: int) -> str | dict:
    """The refusal of `bad` in phrasing `phrasing`; the ISO layout also has validators'
    own date checks (a JSON Schema format, a pydantic `date`)."""
    regex = layout_regex(layout)
    if layout == "YYYY-MM-DD" and phrasing >= 9:
        if phrasing == 9:
            return jsonschema_message(p, {"type": "string", "format": "date"}, bad, prefixed=True)
        return fastapi_body(p, (date, ...), bad)
    return [
        lambda: f"{p}: expected format {layout}",
        lambda: f"{p} must be a date in {layout} format",
        lambda: f"Invalid {p}. Format: {layout}.",
        lambda: f"{p} must look like {example}",
        lambda: f"bad {p} '{bad}', e.g. {example}",
        lambda: jsonschema_message(p, {"pattern": regex}, bad, prefixed=False),
        lambda: fastapi_body(p, (str, Field(pattern=regex)), bad),
        lambda: error_body(p, f"{p} should be formatted like {example}"),
        lambda: errors_body(p, f"expected a date in the format {layout}"),
    ][phrasing % 9]()


@settings(max_examples=60)
@given(
    parameter=parameters,
    layout=st.sampled_from(sorted(LAYOUTS)),
    refused_days=st.lists(
        st.dates(date(1950, 1, 1), date(2090, 12, 31)), min_size=2, max_size=4, unique=True
    ),
    fresh=st.lists(st.dates(date(1950, 1, 1), date(2090, 12, 31)), min_size=1, max_size=5),
    other_layouts=st.lists(st.sampled_from(sorted(LAYOUTS)), min_size=1, max_size=3),
    phrasing=st.integers(0, 10),
)
def test_a_date_layout_is_learned_from_refusals_in_any_phrasing(
    parameter: str,
    layout: str,
    refused_days: list[date],
    fresh: list[date],
    other_layouts: list[str],
    phrasing: int,
) -> None:
    wrong = [other for other in other_layouts if other != layout] or ["DD.MM.YYYY", "YYYYMMDD"]
    wrong = [other for other in wrong if other != layout]
    bad = [day.strftime(LAYOUTS[other]) for day in refused_days for other in wrong] + ["tomorrow"]
    example = refused_days[0].strftime(LAYOUTS[layout])
    refusals = [(value, date_refusal(parameter, layout, value, example, phrasing)) for value in bad]

    prop = learned(parameter, refusals)

    assert all(accepts(prop, day.strftime(LAYOUTS[layout])) for day in fresh), prop
    assert not [value for value in bad if accepts(prop, value)], prop


# -- closed sets of words ---------------------------------------------------------------


def choice(items: list[str]) -> str:
    return ", ".join(items[:-1]) + f" or {items[-1]}"


SET_PHRASINGS = [
    lambda p, s, bad: f"{p}: expected one of {', '.join(s)}",
    lambda p, s, bad: f"{p} must be one of {json.dumps(s)}",
    lambda p, s, bad: f"{p} must be one of {s}",  # Python's list repr
    lambda p, s, bad: f"Invalid {p} '{bad}'. Allowed values: {choice(s)}.",
    lambda p, s, bad: f"{p} must be either {choice(s)}",
    lambda p, s, bad: jsonschema_message(p, {"enum": s}, bad, prefixed=True),
    lambda p, s, bad: fastapi_body(p, (Literal[tuple(s)], ...), bad),
    lambda p, s, bad: error_body(p, f"'{bad}' is not a valid {p}; valid values are {choice(s)}"),
    lambda p, s, bad: errors_body(p, f"must be one of: {', '.join(s)}"),
]


@settings(max_examples=60)
@given(
    parameter=parameters,
    members=st.lists(words, min_size=2, max_size=6, unique=True),
    strangers=st.lists(words, min_size=1, max_size=3, unique=True),
    phrasing=st.sampled_from(range(len(SET_PHRASINGS))),
)
def test_a_closed_set_is_learned_from_refusals_in_any_phrasing(
    parameter: str, members: list[str], strangers: list[str], phrasing: int
) -> None:
    say = SET_PHRASINGS[phrasing]
    bad = [w for w in strangers if w not in members] + [members[0].capitalize()]

    prop = learned(parameter, [(value, say(parameter, members, value)) for value in bad])

    assert sorted(prop["enum"]) == sorted(members)
    assert not [value for value in bad if accepts(prop, value)]


# -- what the learner must not do -------------------------------------------------------


@settings(max_examples=30)
@given(parameter=parameters, fmt=id_formats, numbers=st.lists(st.integers(0, 999), min_size=2))
def test_a_sibling_s_rule_is_never_learned_for_the_parameter(
    parameter: str, fmt: IdFormat, numbers: list[int]
) -> None:
    """Errors about another field (by name, by JSON location) say nothing about this one."""
    said = [
        f"{SIBLING}: must match {fmt.regex}; {parameter}: invalid",
        {
            "detail": [
                {"loc": ["body", SIBLING], "msg": f"String should match pattern '{fmt.regex}'"}
            ]
        },
    ]
    names = Names(frozenset({parameter}), frozenset({SIBLING}))

    for refusal in said:
        statement = read_refusal(refusal if isinstance(refusal, str) else None, refusal, names)
        assert not statement.states_a_rule, refusal
    with pytest.raises(OperatorError, match="state no rule"):
        learned(parameter, [(f"{n}", said[0]) for n in numbers])


def test_contradicting_patterns_are_refused_with_the_reason() -> None:
    refusals = [("123", r"code_id must match ^A-\d{3}$"), ("124", r"code_id must match ^B-\d{3}$")]

    with pytest.raises(OperatorError, match="contradict each other: 2 patterns"):
        learned("code_id", refusals)


def test_an_example_the_stated_pattern_rejects_is_refused() -> None:
    said = r"code_id must match ^A-\d{3}$, e.g. A-12"  # the tool's own example breaks it

    with pytest.raises(OperatorError, match="no rule read from its refusals"):
        learned("code_id", [("123", said), ("77", said)])


def test_refusals_that_quote_a_right_shaped_value_are_not_explained_by_the_format() -> None:
    """A value the stated pattern accepts was refused for another reason: it is left out
    of what the candidate must reject, not a reason to tighten the rule."""
    said = r"code_id must match ^A-\d{3}$"
    prop = learned("code_id", [("123", said), ("9", said), ("A-404", said)])

    assert prop["pattern"] == r"^A-\d{3}$"
    assert accepts(prop, "A-404")


def test_the_description_is_read_when_the_refusals_say_nothing() -> None:
    schema = {
        "type": "object",
        "properties": {
            "staff_ref": {"type": "string", "description": "Whose record, e.g. ST-0042."},
            "office": {"type": "string"},
        },
    }
    description = "Looks up a record. office must be one of north, south."

    prop = learned(
        "staff_ref",
        [("42", "invalid"), ("0042", "invalid")],
        schema=schema,
        description=description,
    )

    assert prop["pattern"] == r"^ST-\d{4}$" and "enum" not in prop
    assert prop["examples"][0] == "ST-0042"


def test_a_type_the_tool_names_replaces_the_offered_one() -> None:
    said = [
        ("12", "quantity_n: '12' is not of type 'integer'"),
        ("x", "quantity_n must be an integer"),
    ]

    prop = learned("quantity_n", said)

    assert prop["type"] == "integer"
    assert accepts(prop, 12) and not accepts(prop, "12")
