"""Redaction: find personal data and secrets in free text and replace them with placeholders.

The gateway runs every ATDP event through a `Redactor` before it is stored, so raw emails,
phone numbers, card numbers, IBANs and credentials never reach the spool or the registry.
Detectors err towards leaving ordinary numbers alone (order ids, dates, prices, timestamps):
card numbers must pass Luhn and IBANs mod-97, phone numbers need a `+` or a US layout.
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from atdp import (
    Event,
    Governance,
    RedactionStatus,
)
from atdp.event import HIDDEN_TEXT_LIMIT

__all__ = ["RedactionResult", "Redactor", "iban_valid", "luhn_valid"]

Span = tuple[int, int]
Finder = Callable[[str], Iterator[Span]]

EMAIL = "pii:email"
PHONE = "pii:phone"
PAYMENT_CARD = "pii:payment_card"
IBAN = "pii:iban"
API_KEY = "secret:api_key"
TENANT_PATTERN = "custom:tenant_pattern"

_ALNUM = frozenset(string.ascii_letters + string.digits)
_DIGIT_GROUP = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class Detector:
    """One kind of sensitive value: its governance label, its placeholder, how to find it.

    `triggers` are lowercase substrings one of which any match must contain, and `requires`
    a regex any match must contain; text without them skips the detector, so most prose
    costs a regex search or two. Neither: always run.
    """

    label: str
    kind: str
    find: Finder
    triggers: tuple[str, ...] = ()
    requires: str | None = None
    _triggers: re.Pattern[str] | None = field(init=False, default=None)
    _requires: re.Pattern[str] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.triggers:  # one search in C instead of a Python loop over substrings
            triggers = re.compile("|".join(re.escape(trigger) for trigger in self.triggers))
            object.__setattr__(self, "_triggers", triggers)
        if self.requires:
            object.__setattr__(self, "_requires", re.compile(self.requires))

    def may_match(self, lowered: str, text: str) -> bool:
        if self._triggers is not None and self._triggers.search(lowered) is None:
            return False
        return self._requires is None or self._requires.search(text) is not None

    @property
    def placeholder(self) -> str:
        return f"[REDACTED:{self.kind}]"


@dataclass(frozen=True, slots=True)
class RedactionResult:
    """Redacted text, the labels of the detectors that matched, and how many regions changed."""

    text: str
    labels: set[str]
    count: int


def _regex(pattern: str | re.Pattern[str], value_groups: bool = True) -> Finder:
    """Spans of a regex's matches; with `value_groups`, of the first named group that matched.

    Named groups let a pattern keep its context ("password: ") and redact only the value.
    """
    compiled = re.compile(pattern)
    names = tuple(compiled.groupindex) if value_groups else ()

    def find(text: str) -> Iterator[Span]:
        for match in compiled.finditer(text):
            group = next((name for name in names if match.start(name) >= 0), 0)
            start, end = match.span(group)
            if end > start:  # a tenant pattern may match the empty string somewhere
                yield start, end

    return find


# --- payment cards -----------------------------------------------------------------------

# Digit groups joined by single spaces or dashes, not glued to letters (hashes, uuids) nor
# after a "+" (phone numbers).
_DIGIT_RUN = re.compile(r"(?<![A-Za-z0-9_+])[0-9]+(?:[ -][0-9]+)*(?![A-Za-z0-9_])")


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn checksum."""
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card_shaped(lengths: list[int]) -> bool:
    """How card numbers are printed: one block, 4-4-4-4(-3), or Amex/Diners 4-6-5 and 4-6-4."""
    if len(lengths) == 1 or lengths[0] != 4:
        return len(lengths) == 1 and 13 <= lengths[0] <= 19
    if lengths[:2] == [4, 6]:
        return len(lengths) == 3 and lengths[2] in (4, 5)
    *head, last = lengths
    return 3 <= len(head) <= 4 and set(head) == {4} and last <= 4 and sum(lengths) <= 19


def _is_card(text: str, groups: list[Span]) -> bool:
    digits = "".join(text[start:end] for start, end in groups)
    # Payment networks issue from major industry identifiers 2-6; this spares epoch timestamps.
    return digits[0] in "23456" and luhn_valid(digits)


def _card_windows(text: str, groups: list[Span]) -> Iterator[Span]:
    """Leftmost-longest runs of whole digit groups that look and checksum like a card.

    Trying sub-runs catches a card that sits next to another number ("4111 ... 1111 2026").
    """
    lengths = [end - start for start, end in groups]
    index = 0
    while index < len(groups):
        ends = range(min(len(groups), index + 5), index, -1)
        shaped = (end for end in ends if _card_shaped(lengths[index:end]))
        end = next((end for end in shaped if _is_card(text, groups[index:end])), None)
        if end is None:
            index += 1
            continue
        yield groups[index][0], groups[end - 1][1]
        index = end


def _card_spans(text: str) -> Iterator[Span]:
    for run in _DIGIT_RUN.finditer(text):
        offset = run.start()
        groups = [(m.start() + offset, m.end() + offset) for m in _DIGIT_GROUP.finditer(run[0])]
        yield from _card_windows(text, groups)


# --- IBANs -------------------------------------------------------------------------------

# ISO 13616 registry: IBAN length by country. A fixed length is what lets a scanner tell
# where an IBAN ends when ordinary words follow it.
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])[A-Za-z]{2}[0-9]{2}")


def iban_valid(iban: str) -> bool:
    """Whether a compact IBAN passes the ISO 13616 mod-97 check."""
    rearranged = (iban[4:] + iban[:4]).upper()
    if not rearranged.isascii() or not rearranged.isalnum():
        return False
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _iban_end(text: str, start: int, length: int) -> int | None:
    """Where an IBAN of `length` characters starting at `start` ends, compact or in fours."""
    chars: list[str] = []
    index = start
    while index < len(text) and len(chars) < length:
        char = text[index]
        if char in _ALNUM:
            chars.append(char)
        elif not (char == " " and len(chars) % 4 == 0 and text[index - 1] != " "):
            break
        index += 1
    if len(chars) < length or (index < len(text) and text[index] in _ALNUM):
        return None
    return index if iban_valid("".join(chars)) else None


def _iban_spans(text: str) -> Iterator[Span]:
    last_end = 0
    for start in _IBAN_START.finditer(text):
        length = _IBAN_LENGTHS.get(start[0][:2].upper())
        if start.start() < last_end or length is None:
            continue
        end = _iban_end(text, start.start(), length)
        if end is not None:
            last_end = end
            yield start.start(), end


# --- phone numbers -----------------------------------------------------------------------

# "+" then digit groups, each one separator apart: "+44 20 7946 0958", "+1 (555) 123-4567".
_PHONE_INTERNATIONAL = re.compile(r"(?<![\w+])\+[0-9]+(?:[ .-]?\([0-9]+\)|[ .-][0-9]+)*(?!\w)")
_PHONE_US = re.compile(
    r"(?<![\w+-])(?:1[ .-])?(?:\([0-9]{3}\) ?|[0-9]{3}[ .-])[0-9]{3}[ .-][0-9]{4}(?![\w-])"
)


def _international_end(text: str, match: re.Match[str]) -> int | None:
    """End of the longest prefix holding at most 15 digits (E.164); None under 8 digits."""
    digits, end = 0, match.start()
    for group in _DIGIT_GROUP.finditer(match[0]):
        if digits + len(group[0]) > 15:
            break  # a number written after the phone number, not part of it
        digits += len(group[0])
        end = match.start() + group.end()
    if digits < 8:
        return None
    return end + 1 if text[end : end + 1] == ")" else end


def _phone_spans(text: str) -> Iterator[Span]:
    for match in _PHONE_INTERNATIONAL.finditer(text):
        end = _international_end(text, match)
        if end is not None:
            yield match.start(), end
    for match in _PHONE_US.finditer(text):
        yield match.span()


# --- secrets -----------------------------------------------------------------------------

# Names whose value is a credential: "api_key", "X-Api-Key", "db_password", "clientSecret".
_SECRET_NAME = (
    r"(?:api[_-]?key|secret(?:[_-]?key)?|access[_-]?key|private[_-]?key|passw(?:or)?d"
    r"|passphrase|pwd|token|authorization|credentials?)"
)
_SECRET_KEY = re.compile(rf"(?i){_SECRET_NAME}$")
_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_KEY_FORMATS = (
    r"(?s:-----BEGIN[A-Z ]*PRIVATE KEY-----(?:.*?-----END[A-Z ]*PRIVATE KEY-----|.*))",
    r"(?<![A-Za-z0-9_-])sk-[A-Za-z0-9_-]{20,}",
    r"(?<![A-Za-z0-9_-])evp_[A-Za-z0-9_-]{16,}",
    r"(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![0-9A-Z])",
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})",
)
_KEY = "|".join(_KEY_FORMATS)
# The token must hold a digit, so prose ("bearer instrument") is left alone.
_BEARER = r"(?i)\bbearer\s+(?P<token>(?=[A-Za-z._~+/=-]*[0-9])[A-Za-z0-9._~+/=-]{8,})"
# `name: value`, `name="value"`, `"name": 'value'`; only the value is replaced, and a
# value that is already a placeholder is left alone so redacting twice changes nothing.
_ASSIGNMENT = (
    rf"(?i)(?<![A-Za-z0-9_-])[A-Za-z0-9_-]*?{_SECRET_NAME}[\"']?\s*[:=]\s*"
    r"(?:(?:basic|bearer|token)\s+)?(?![\"']?\[REDACTED:)"
    r"(?:\"(?P<dq>[^\"\n]+)\"|'(?P<sq>[^'\n]+)'|(?P<bare>[^\s\"',;]+))"
)

# Lowercase substrings that every match of a secret detector contains.
_KEY_TRIGGERS = ("private key", "sk-", "evp_", "akia", "github_pat_", *(f"gh{c}_" for c in "pousr"))
_NAME_TRIGGERS = ("key", "secret", "passw", "passphrase", "pwd", "token", "authoriz", "credential")

_EMAIL = (
    r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?![A-Za-z0-9-])"
)

# Order matters only for overlaps: the earliest detector names the merged placeholder.
BUILTIN_DETECTORS = (
    Detector(API_KEY, "API_KEY", _regex(_KEY), _KEY_TRIGGERS),
    Detector(API_KEY, "API_KEY", _regex(_BEARER), ("bearer",)),
    Detector(API_KEY, "API_KEY", _regex(_ASSIGNMENT), _NAME_TRIGGERS),
    # Country code and check digits start every IBAN.
    Detector(IBAN, "IBAN", _iban_spans, requires=r"[A-Za-z]{2}[0-9]{2}"),
    # At least 13 digits, single spaces or dashes between groups.
    Detector(PAYMENT_CARD, "PAYMENT_CARD", _card_spans, requires=r"[0-9](?:[ -]?[0-9]){12}"),
    Detector(EMAIL, "EMAIL", _regex(_EMAIL), ("@",)),
    # At least 8 digits (E.164's floor; a US number has 10), at most ") (" between two.
    Detector(PHONE, "PHONE", _phone_spans, requires=r"[0-9](?:[^0-9]{0,3}[0-9]){7}"),
)
SECRET_PLACEHOLDER = BUILTIN_DETECTORS[0].placeholder


def _tenant_detector(pattern: str) -> Detector:
    """A detector for one tenant-configured regex, refusing patterns that cannot work."""
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ValueError(
            f"tenant redaction pattern {pattern!r} is not a valid regular expression ({error}); "
            "fix or remove it in the tenant policy's redaction_patterns"
        ) from None
    if compiled.fullmatch(""):
        raise ValueError(
            f"tenant redaction pattern {pattern!r} matches the empty string, so it would "
            "redact nothing useful; make it require at least one character"
        )
    return Detector(TENANT_PATTERN, "CUSTOM", _regex(compiled, value_groups=False))


def _merge(hits: Iterable[tuple[int, int, int]]) -> list[tuple[int, int, set[int]]]:
    """Union overlapping (start, end, detector) hits, so no part of any match survives."""
    regions: list[tuple[int, int, set[int]]] = []
    for start, end, detector in sorted(hits):
        if regions and start < regions[-1][1]:
            first, last, detectors = regions[-1]
            regions[-1] = (first, max(last, end), detectors | {detector})
        else:
            regions.append((start, end, {detector}))
    return regions


class Redactor:
    """Replaces personal data and secrets with `[REDACTED:<KIND>]`; one per tenant policy.

    Args:
        patterns: the tenant's extra regexes (`TenantPolicy.redaction_patterns`), labelled
            `custom:tenant_pattern`. An invalid one raises ValueError naming it.
    """

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        tenant = tuple(_tenant_detector(pattern) for pattern in patterns)
        self._detectors = BUILTIN_DETECTORS + tenant
        self._clean = _CleanTexts()  # as plain text
        self._clean_json = _CleanTexts()  # as JSON text, walked value by value

    def redact_text(self, text: str) -> RedactionResult:
        """Redact one piece of free text."""
        if text in self._clean:
            return RedactionResult(text, set(), 0)
        lowered = text.lower()
        hits = [
            (start, end, index)
            for index, detector in enumerate(self._detectors)
            if detector.may_match(lowered, text)
            for start, end in detector.find(text)
        ]
        if not hits:
            self._clean.add(text)
            return RedactionResult(text, set(), 0)
        return self._apply(text, _merge(hits))

    def _apply(self, text: str, regions: list[tuple[int, int, set[int]]]) -> RedactionResult:
        pieces: list[str] = []
        labels: set[str] = set()
        cursor = 0
        for start, end, detectors in regions:
            pieces += [text[cursor:start], self._detectors[min(detectors)].placeholder]
            labels |= {self._detectors[index].label for index in detectors}
            cursor = end
        pieces.append(text[cursor:])
        return RedactionResult("".join(pieces), labels, len(regions))

    def redact_event(self, event: Event) -> Event:
        """A new event with observation, hidden state, action and outcome redacted.

        Metadata (ids, tenant, session) is kept as is. `governance.redaction` becomes
        REDACTED or CLEAN, `redacted_fields` gains the changed paths, `labels` the findings.
        """
        document = event.model_dump(mode="json")
        redacted = self.redact_document(document)
        if all(redacted.get(part) is document.get(part) for part in _PARTS):
            governance = Governance.model_validate(redacted["governance"])
            return event.model_copy(update={"governance": governance})
        return Event.model_validate(redacted)

    def redact_document(self, document: dict[str, Any]) -> dict[str, Any]:
        """`redact_event` for an event in its JSON shape (the gateway builds events so).

        Returns a new document; `document` and everything in it are left as they are (the
        parts nothing was found in are shared with it).
        """
        scan = _EventScan(self)
        redacted = dict(document)
        for part, walk in _PARTS.items():
            if document.get(part) is not None:
                redacted[part] = walk(document[part], scan)
        redacted["governance"] = _governance(document.get("governance") or {}, scan)
        return redacted


class _EventScan:
    """Redacts the parts of one event, remembering which paths changed and which labels hit.

    A part nothing was found in comes back as the very same object, so an event with
    nothing to redact (the common case) is walked but not copied.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.fields: list[str] = []
        self.labels: set[str] = set()

    def text(self, value: str | None, path: str) -> str | None:
        """Free text; JSON text (a tool's arguments or output) keeps its JSON shape."""
        if value is None:
            return None
        if value.lstrip().startswith(("{", "[")):
            if value in self.redactor._clean_json:
                return value
            document = _json_container(value)
            if document is not None:
                try:
                    return self._json_text(value, document, path)
                except RecursionError:
                    pass  # nested deeper than the walk can go: redact it as plain text instead
        elif value in self.redactor._clean:
            return value
        result = self.redactor.redact_text(value)
        if result.count:
            self.fields.append(path)
            self.labels |= result.labels
        return result.text

    def _json_text(self, original: str, document: Any, path: str) -> str:
        inner = _EventScan(self.redactor)
        redacted = inner.json(document, "$")
        if not inner.fields:
            self.redactor._clean_json.add(original)
            return original
        self.fields.append(path)
        self.labels |= inner.labels
        return json.dumps(redacted, ensure_ascii=False)

    def json(self, value: Any, path: str) -> Any:
        """A JSON value with every string (keys too) and card-like integer redacted."""
        if isinstance(value, str):
            return self.text(value, path)
        if isinstance(value, int) and not isinstance(value, bool):
            redacted = self.text(str(value), path)
            return value if redacted == str(value) else redacted
        if isinstance(value, list):
            items = [self.json(item, f"{path}[{index}]") for index, item in enumerate(value)]
            return _same_list(items, value)
        if isinstance(value, dict):
            return self._object(value, path)
        return value

    def _object(self, value: dict[str, Any], path: str) -> dict[str, Any]:
        redacted: dict[str, Any] = {}
        changed = False
        clean = self.redactor._clean
        for key, item in value.items():
            if key in clean and key not in redacted:
                new_key = key
                child = _child_path(path, key)
            else:
                found = self.redactor.redact_text(key)  # keys can be emails too
                new_key = _unique_key(found.text, redacted)
                child = _child_path(path, new_key)
                if found.count:
                    self.fields.append(child)
                    self.labels |= found.labels
            new_item = self._secret(item, child) if _secret_key(key) else self.json(item, child)
            redacted[new_key] = new_item
            changed = changed or new_key != key or new_item is not item
        return redacted if changed else value

    def _secret(self, value: Any, path: str) -> Any:
        """The value of a credential-named key: scalars go entirely, containers are walked."""
        scalar = isinstance(value, str | int | float) and not isinstance(value, bool)
        if not scalar or value in ("", SECRET_PLACEHOLDER):
            return self.json(value, path)
        self.fields.append(path)
        self.labels.add(API_KEY)
        return SECRET_PLACEHOLDER


class _CleanTexts:
    """Texts found clean before, bounded in characters; a text with a finding never enters
    (it holds the raw value). Every request repeats its system prompt, tool schemas and the
    history so far, so most texts a gateway scans were scanned before. A redactor exists per
    distinct set of tenant patterns, so each keeps a few megabytes at most."""

    def __init__(self, text_max: int = 64 * 1024, total_max: int = 2 * 2**20) -> None:
        self.text_max, self.total_max = text_max, total_max
        self._texts: dict[str, None] = {}
        self._chars = 0

    def __contains__(self, text: str) -> bool:
        return text in self._texts

    def add(self, text: str) -> None:
        if len(text) > self.text_max:
            return
        if self._chars + len(text) > self.total_max:
            self._texts.clear()  # rare, and cheaper than tracking recency on every hit
            self._chars = 0
        self._texts[text] = None
        self._chars += len(text)


def _same_list(items: list[Any], original: list[Any]) -> list[Any]:
    """`original` when every item came back unchanged (the same object), else `items`."""
    return original if all(new is old for new, old in zip(items, original, strict=True)) else items


_SECRET_KEYS: dict[str, bool] = {}


def _secret_key(key: str) -> bool:
    """Whether a JSON key names a credential ("api_key", "clientSecret"); memoised, since the
    same few keys recur in every request."""
    secret = _SECRET_KEYS.get(key)
    if secret is None:
        secret = _SECRET_KEY.search(_camel_to_snake(key)) is not None
        if len(_SECRET_KEYS) < 50_000:
            _SECRET_KEYS[key] = secret
    return secret


def _json_container(text: str) -> Any:
    """The parsed object or array when `text` is JSON for one, else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict | list) else None


def _camel_to_snake(key: str) -> str:
    return _CAMEL_HUMP.sub("_", key)


def _child_path(path: str, key: str) -> str:
    if key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key, ensure_ascii=False)}]"


def _unique_key(key: str, taken: dict[str, Any]) -> str:
    """`key`, or `key#2`, `key#3`...: two emails as keys must not collapse into one entry."""
    candidate, number = key, 1
    while candidate in taken:
        number += 1
        candidate = f"{key}#{number}"
    return candidate


# The parts below walk an event's JSON document (`Event.model_dump(mode="json")` or the
# gateway's own), so the paths in `redacted_fields` are the document's.


def _changed(document: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """`document` with `update` applied; the document itself when no value changed."""
    if all(value is document.get(key) for key, value in update.items()):
        return document
    return {**document, **update}


def _tool_call(call: dict[str, Any], scan: _EventScan, path: str) -> dict[str, Any]:
    return _changed(call, {"arguments": scan.text(call.get("arguments"), f"{path}.arguments")})


def _tool_calls(calls: list[dict[str, Any]], scan: _EventScan, path: str) -> list[dict[str, Any]]:
    redacted = [_tool_call(call, scan, f"{path}[{index}]") for index, call in enumerate(calls)]
    return _same_list(redacted, calls)


def _message(message: dict[str, Any], scan: _EventScan, path: str) -> dict[str, Any]:
    update = {"content": scan.json(message.get("content"), f"{path}.content")}
    if message.get("name") is not None:
        update["name"] = scan.text(message["name"], f"{path}.name")
    if message.get("tool_calls"):
        update["tool_calls"] = _tool_calls(message["tool_calls"], scan, f"{path}.tool_calls")
    return _changed(message, update)


def _tool_spec(spec: dict[str, Any], scan: _EventScan, path: str) -> dict[str, Any]:
    return _changed(
        spec,
        {
            "description": scan.text(spec.get("description"), f"{path}.description"),
            "parameters": scan.json(spec.get("parameters"), f"{path}.parameters"),
        },
    )


def _observation(observation: dict[str, Any], scan: _EventScan) -> dict[str, Any]:
    update: dict[str, Any] = {}
    if observation.get("messages"):
        messages = observation["messages"]
        update["messages"] = _same_list(
            [_message(m, scan, f"observation.messages[{i}]") for i, m in enumerate(messages)],
            messages,
        )
    if observation.get("tools"):
        tools = observation["tools"]
        update["tools"] = _same_list(
            [_tool_spec(t, scan, f"observation.tools[{i}]") for i, t in enumerate(tools)], tools
        )
    if observation.get("content") is not None:
        update["content"] = scan.text(observation["content"], "observation.content")
    if observation.get("data") is not None:
        update["data"] = scan.json(observation["data"], "observation.data")
    return _changed(observation, update)


def _hidden(hidden: dict[str, Any], scan: _EventScan) -> dict[str, Any]:
    update: dict[str, Any] = {}
    for name in ("plan", "reasoning_summary"):
        if hidden.get(name) is not None:
            # Placeholders can be longer than what they replace; the model caps hidden text.
            update[name] = scan.text(hidden[name], f"hidden.{name}")[:HIDDEN_TEXT_LIMIT]
    return _changed(hidden, update)


def _action(action: dict[str, Any], scan: _EventScan) -> dict[str, Any]:
    if action.get("type") == "tool_call":
        return _changed(action, {"call": _tool_call(action["call"], scan, "action.call")})
    before = len(scan.fields)
    update: dict[str, Any] = {}
    if action.get("content") is not None:
        update["content"] = scan.text(action["content"], "action.content")
    if action.get("tool_calls"):
        update["tool_calls"] = _tool_calls(action["tool_calls"], scan, "action.tool_calls")
    if len(scan.fields) > before and action.get("token_ids") is not None:
        # Token ids spell the raw text; keeping them would undo the redaction.
        update |= {"token_ids": None, "logprobs": None}
        scan.fields.append("action.token_ids")
    return _changed(action, update)


def _outcome(outcome: dict[str, Any], scan: _EventScan) -> dict[str, Any]:
    update: dict[str, Any] = {}
    if outcome.get("tool_return") is not None:
        update["tool_return"] = scan.json(outcome["tool_return"], "outcome.tool_return")
    if outcome.get("error_message") is not None:
        update["error_message"] = scan.text(outcome["error_message"], "outcome.error_message")
    return _changed(outcome, update)


_PARTS = {"observation": _observation, "hidden": _hidden, "action": _action, "outcome": _outcome}


def _governance(current: dict[str, Any], scan: _EventScan) -> dict[str, Any]:
    """Record the scan; an event redacted earlier stays REDACTED when scanned again."""
    redacted = bool(scan.fields) or current.get("redaction") == RedactionStatus.REDACTED
    return {
        **current,
        "redaction": (RedactionStatus.REDACTED if redacted else RedactionStatus.CLEAN).value,
        "redacted_fields": list(dict.fromkeys([*current.get("redacted_fields", ()), *scan.fields])),
        "labels": sorted({*current.get("labels", ()), *scan.labels}),
    }
