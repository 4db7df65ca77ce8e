"""Governance: redaction leaves no personal data or secret behind; policy decides eligibility."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from atdp import (
    Consent,
    Event,
    Governance,
    RedactionStatus,
    ReviewStatus,
    TrainingEligibility,
    new_id,
)
from atdp.event import HIDDEN_TEXT_LIMIT
from proxy.governance import (
    Redactor,
    decide_governance,
    governance_document,
    parse_training_header,
)
from proxy.governance.redaction import iban_valid, luhn_valid
from registry import TenantPolicy
from tests import strategies as S

REDACTOR = Redactor()
TRAJECTORY = uuid.UUID("01900000-0000-7000-8000-000000000002")
NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

# Any text but NUL (refused by ATDP) and lone surrogates (not text).
surroundings = st.text(
    st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30
)


# --- generators of valid values, computed here rather than with the code under test ----


def with_luhn_digit(body: str) -> str:
    """`body` followed by the check digit that makes it pass Luhn."""
    total = 0
    for index, char in enumerate(reversed(body)):
        digit = int(char)
        if index % 2 == 0:  # these get doubled once the check digit is appended
            digit = digit * 2 - 9 if digit > 4 else digit * 2
        total += digit
    return body + str(-total % 10)


def with_iban_check(country: str, bban: str) -> str:
    """The IBAN for `bban` in `country`, with ISO 13616 check digits."""
    numeric = int("".join(str(int(char, 36)) for char in bban + country + "00"))
    return f"{country}{98 - numeric % 97:02d}{bban}"


def in_fours(value: str, separator: str = " ") -> str:
    return separator.join(value[index : index + 4] for index in range(0, len(value), 4))


DIGITS = "0123456789"
# Issuer prefixes of real networks (Visa, Mastercard, Amex, Discover, JCB, UnionPay).
CARD_PREFIXES = ["4", "51", "55", "2221", "34", "37", "6011", "65", "3528", "62"]


@st.composite
def card_numbers(draw) -> str:
    prefix = draw(st.sampled_from(CARD_PREFIXES))
    length = draw(st.integers(13, 19))
    size = length - 1 - len(prefix)
    return with_luhn_digit(prefix + draw(st.text(DIGITS, min_size=size, max_size=size)))


def printed_card(digits: str, layout: str) -> str:
    if layout == "compact":
        return digits
    return in_fours(digits, " " if layout == "spaces" else "-")


# BBAN layouts of a few countries: (country, [(alphabet, count), ...]).
UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
BBAN_LAYOUTS = {
    "DE": [(DIGITS, 18)],
    "GB": [(UPPER, 4), (DIGITS, 14)],
    "FR": [(DIGITS, 10), (UPPER + DIGITS, 11), (DIGITS, 2)],
    "NL": [(UPPER, 4), (DIGITS, 10)],
    "BE": [(DIGITS, 12)],
    "NO": [(DIGITS, 11)],
}


@st.composite
def ibans(draw) -> str:
    country = draw(st.sampled_from(sorted(BBAN_LAYOUTS)))
    parts = [
        draw(st.text(alphabet, min_size=count, max_size=count))
        for alphabet, count in BBAN_LAYOUTS[country]
    ]
    return with_iban_check(country, "".join(parts))


emails = st.from_regex(
    r"[A-Za-z0-9][A-Za-z0-9._%+-]{0,15}@[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?"
    r"(?:\.[a-z0-9](?:[a-z0-9-]{0,8}[a-z0-9])?)*\.[a-z]{2,8}",
    fullmatch=True,
)
token_chars = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", min_size=1)
api_keys = st.one_of(
    st.from_regex(r"sk-(?:proj-)?[A-Za-z0-9_-]{20,48}", fullmatch=True),
    st.from_regex(r"evp_[A-Za-z0-9_-]{43}", fullmatch=True),
    st.from_regex(r"AKIA[0-9A-Z]{16}", fullmatch=True),
    st.from_regex(r"gh[pos]_[A-Za-z0-9]{36}", fullmatch=True),
)


def embedded(before: str, value: str, after: str) -> str:
    return f"{before} {value} {after}"


def assert_redacted(text: str, raw: str, kind: str, label: str) -> None:
    result = REDACTOR.redact_text(text)
    assert raw not in result.text
    assert f"[REDACTED:{kind}]" in result.text
    assert label in result.labels
    assert result.count >= 1


# --- the checksum helpers agree with published examples --------------------------------


@pytest.mark.parametrize("number", ["4111111111111111", "378282246310005", "6011111111111117"])
def test_published_test_card_numbers_pass_luhn(number: str) -> None:
    assert luhn_valid(number)
    assert with_luhn_digit(number[:-1]) == number


@pytest.mark.parametrize("iban", ["GB82WEST12345698765432", "DE89370400440532013000"])
def test_published_ibans_pass_mod_97(iban: str) -> None:
    assert iban_valid(iban)
    assert with_iban_check(iban[:2], iban[4:]) == iban


# --- property tests: every kind of value disappears from any surrounding text ---------


@given(surroundings, emails, surroundings)
def test_emails_are_redacted_anywhere(before: str, email: str, after: str) -> None:
    assume(email not in before and email not in after)
    assert_redacted(embedded(before, email, after), email, "EMAIL", "pii:email")


@given(surroundings, card_numbers(), st.sampled_from(["compact", "spaces", "dashes"]), surroundings)
def test_luhn_valid_cards_are_redacted_anywhere(
    before: str, digits: str, layout: str, after: str
) -> None:
    card = printed_card(digits, layout)
    assume(card not in before and card not in after)
    assert_redacted(embedded(before, card, after), card, "PAYMENT_CARD", "pii:payment_card")


@given(card_numbers(), st.integers(1, 9), st.sampled_from(["compact", "spaces", "dashes"]))
def test_cards_failing_luhn_are_left_alone(digits: str, shift: int, layout: str) -> None:
    # 17-19 digits in fours end in a 4-4-4-4 run that may pass Luhn on its own: that reads
    # as a card followed by another number, and is redacted on purpose.
    assume(layout == "compact" or len(digits) <= 16)
    broken = digits[:-1] + str((int(digits[-1]) + shift) % 10)
    text = f"reference {printed_card(broken, layout)} please"
    assert not luhn_valid(broken)
    assert REDACTOR.redact_text(text).text == text


@given(surroundings, ibans(), st.booleans(), surroundings)
def test_valid_ibans_are_redacted_anywhere(
    before: str, compact: str, grouped: bool, after: str
) -> None:
    iban = in_fours(compact) if grouped else compact
    assume(iban not in before and iban not in after)
    assert_redacted(embedded(before, iban, after), iban, "IBAN", "pii:iban")


@given(ibans(), st.integers(1, 96))
def test_strings_failing_mod_97_are_not_ibans(iban: str, shift: int) -> None:
    check = (int(iban[2:4]) + shift) % 97  # a different residue, so the checksum breaks
    broken = f"{iban[:2]}{check:02d}{iban[4:]}"
    result = REDACTOR.redact_text(f"account {broken} closed")
    assert result.text == f"account {broken} closed"
    assert "pii:iban" not in REDACTOR.redact_text(f"account {in_fours(broken)}").labels


@given(surroundings, api_keys, surroundings)
def test_api_keys_are_redacted_anywhere(before: str, key: str, after: str) -> None:
    assume(key not in before and key not in after)
    assert_redacted(embedded(before, key, after), key, "API_KEY", "secret:api_key")


ASSIGNMENTS = ["{name}: {value}", "{name}={value}", "{name} = {value}", '"{name}": "{value}"']
SECRET_VALUE_CHARS = UPPER + UPPER.lower() + DIGITS + "!#$%&*+./?^_~-"


@given(
    surroundings,
    st.sampled_from(["api_key", "password", "secret", "X-Api-Key", "db_password", "clientSecret"]),
    st.sampled_from(ASSIGNMENTS),
    st.text(SECRET_VALUE_CHARS, min_size=6),
    surroundings,
)
def test_assigned_secrets_lose_their_value(
    before: str, name: str, layout: str, value: str, after: str
) -> None:
    assume(value not in before and value not in after and value not in name)
    text = embedded(before, layout.format(name=name, value=value), after)
    result = REDACTOR.redact_text(text)
    assert value not in result.text
    assert layout.format(name=name, value="[REDACTED:API_KEY]") in result.text


@given(token_chars, st.integers(0, 9))
def test_bearer_tokens_are_redacted(token: str, digit: int) -> None:
    token = f"{token}{digit}abcdefgh"
    result = REDACTOR.redact_text(f"Authorization: Bearer {token}\nAccept: */*")
    assert token not in result.text
    assert "Bearer [REDACTED:API_KEY]" in result.text


# --- examples: formats, and ordinary text that must survive --------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call +1 (555) 123-4567 now", "call [REDACTED:PHONE] now"),
        ("office: +44 20 7946 0958.", "office: [REDACTED:PHONE]."),
        ("mobile +4915112345678", "mobile [REDACTED:PHONE]"),
        ("US 555-123-4567 or (555) 123-4567", "US [REDACTED:PHONE] or [REDACTED:PHONE]"),
        ("quoted 'secret=\"two words\"'", "quoted 'secret=\"[REDACTED:API_KEY]\"'"),
        ("card 4111 1111 1111 1111 exp 2026", "card [REDACTED:PAYMENT_CARD] exp 2026"),
        ("amex 3782 822463 10005", "amex [REDACTED:PAYMENT_CARD]"),
        ("pay to BE71 0961 2345 6769 today", "pay to [REDACTED:IBAN] today"),
        (
            "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----\nbye",
            "key:\n[REDACTED:API_KEY]\nbye",
        ),
        ("cut -----BEGIN PRIVATE KEY-----\nMIIEow", "cut [REDACTED:API_KEY]"),
    ],
)
def test_formats_are_redacted_to_their_placeholder(text: str, expected: str) -> None:
    assert REDACTOR.redact_text(text).text == expected


@pytest.mark.parametrize(
    "text",
    [
        "order 000123 shipped",
        "due 2026-11-30, then 2026-12-01 at 10:00:00",
        "total $1,299.99 (was 1 499,00 EUR)",
        "version 1.2.3 on build 20261130 with 15 items",
        "created at 1732960800000 ms",
        "the bearer instrument and max_tokens=100",
        "ISBN 978-3-16-148410-0",
        "a secretary passed the keyboard",
        "Plain prose with no numbers at all.",
    ],
)
def test_ordinary_text_is_untouched(text: str) -> None:
    result = REDACTOR.redact_text(text)
    assert (result.text, result.labels, result.count) == (text, set(), 0)


@given(
    st.integers(0, 999_999),
    st.dates(),
    st.decimals(0, 10**7, places=2, allow_nan=False, allow_infinity=False),
)
def test_order_ids_dates_and_prices_are_untouched(order: int, day, price) -> None:
    text = f"order {order:06d} placed {day.isoformat()} for ${price:,.2f}"
    assert REDACTOR.redact_text(text).text == text


def test_adversarial_inputs_take_linear_time() -> None:
    texts = [
        "a" * 200_000 + "@",
        "1" * 200_000,
        "1234 " * 40_000,
        "+1 " + "2 " * 80_000,
        "DE89 " * 40_000,
        "password " * 20_000,
    ]
    started = time.perf_counter()
    for text in texts:
        REDACTOR.redact_text(text)
    assert time.perf_counter() - started < 10  # quadratic backtracking would take minutes


# --- tenant patterns ---------------------------------------------------------------------


def exhaustive(redactor: Redactor) -> Redactor:
    """The same detectors without their fast paths: no triggers, no required patterns."""
    slow = Redactor()
    slow._detectors = tuple(
        dataclasses.replace(detector, triggers=(), requires=None)
        for detector in redactor._detectors
    )
    return slow


INTERNATIONAL_PHONE = r"\+[1-9][0-9]{0,2}(?:[ .-]?\([0-9]{1,4}\)|[ .-][0-9]{2,4}){2,4}"
US_PHONE = r"(?:1[ .-])?(?:\([0-9]{3}\) ?|[0-9]{3}[ .-])[0-9]{3}[ .-][0-9]{4}"
phones = st.one_of(
    st.from_regex(INTERNATIONAL_PHONE, fullmatch=True), st.from_regex(US_PHONE, fullmatch=True)
)
mixed_text = st.lists(
    st.one_of(
        surroundings,
        card_numbers().flatmap(
            lambda n: st.sampled_from(["compact", "spaces", "dashes"]).map(
                lambda layout: printed_card(n, layout)
            )
        ),
        ibans(),
        emails,
        api_keys,
        phones,
        st.integers(0, 10**20).map(str),
        st.sampled_from(["password=hunter22", "Bearer abc123def456", "token: 'x9'"]),
    ),
    max_size=8,
).map(" ".join)


@given(mixed_text)
def test_fast_paths_find_exactly_what_every_detector_run_everywhere_finds(text: str) -> None:
    """Triggers, required patterns and the clean-text cache only skip work: twice, so the
    second call can hit the cache."""
    fast, slow = Redactor(), exhaustive(Redactor())
    expected = slow.redact_text(text)
    assert fast.redact_text(text) == expected
    assert fast.redact_text(text) == expected


def test_tenant_patterns_redact_alongside_the_builtin_detectors() -> None:
    redactor = Redactor([r"ACME-\d{6}", r"(?i)project\s+falcon"])
    result = redactor.redact_text("ticket ACME-123456 for Project  Falcon, cc a@b.io")
    assert result.text == "ticket [REDACTED:CUSTOM] for [REDACTED:CUSTOM], cc [REDACTED:EMAIL]"
    assert result.labels == {"custom:tenant_pattern", "pii:email"}
    assert result.count == 3
    assert REDACTOR.redact_text("ticket ACME-123456").text == "ticket ACME-123456"


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [("(unclosed", "not a valid regular expression"), ("a*", "matches the empty string")],
)
def test_unusable_tenant_patterns_are_refused_by_name(pattern: str, reason: str) -> None:
    with pytest.raises(ValueError, match="tenant redaction pattern") as raised:
        Redactor(["fine-\\d+", pattern])
    assert repr(pattern) in str(raised.value)
    assert reason in str(raised.value)


# --- whole events ------------------------------------------------------------------------

CARD = "5555 5555 5555 4444"
EMAIL = "jane.doe@example.com"
OPENAI_KEY = "sk-proj-Abcdefghijklmnopqrstuvwx1234"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5" * 4
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
IBAN = "DE89 3704 0044 0532 0130 00"
PASSWORD = "hunter2-Correct-Horse"
OTHER_IBAN = "GB82 WEST 1234 5698 7654 32"
PHONE = "+1 (555) 123-4567"
# Inside a JSON string its quotes are escaped: redacting the JSON text as plain text would
# cut at the backslash, leak the words and break the JSON.
QUOTED_PASSWORD = "open sesame"
RAW_VALUES = [CARD, EMAIL, OPENAI_KEY, GITHUB_TOKEN, AWS_KEY, IBAN, OTHER_IBAN, PASSWORD]
RAW_VALUES += [QUOTED_PASSWORD, PHONE]


def event(**parts) -> Event:
    body = {
        "id": str(new_id()),
        "trajectory_id": str(TRAJECTORY),
        "seq": 0,
        "kind": "llm_call",
        "created_at": "2026-11-30T10:00:00Z",
        "metadata": {"tenant": "acme", "session": "s-1", "extra": {"request": "r-000123"}},
        "replay": {"class": "deterministic"},
    }
    return Event.model_validate(body | parts)


def secret_event() -> Event:
    arguments = {"customer": {"email": EMAIL, "note": f"wire to {OTHER_IBAN}"}}
    return event(
        observation={
            "messages": [
                {"role": "system", "content": "You are a billing assistant."},
                {"role": "user", "content": f"My card is {CARD}, mail {EMAIL}"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "call_1", "name": "lookup", "arguments": json.dumps(arguments)}
                    ],
                },
            ],
            "tools": [{"name": "lookup", "description": "Find a customer by email."}],
            "content": f"escalated by {EMAIL}",
            "data": {"caller": {"phone": PHONE, "tier": "gold"}},
        },
        hidden={"plan": f"look up {EMAIL}", "harness_fingerprint": "h-0001"},
        action={
            "type": "tool_call",
            "call": {
                "id": "call_2",
                "name": "charge",
                "arguments": json.dumps(
                    {
                        "iban": IBAN,
                        "password": PASSWORD,
                        "amount": 1299,
                        "config": f'password="{QUOTED_PASSWORD}" retries=3',
                    }
                ),
            },
        },
        outcome={
            "tool_return": {"token": GITHUB_TOKEN, "log": [f"used {OPENAI_KEY}"], "id": 4411},
            "error_message": f"denied for {AWS_KEY}",
        },
    )


def test_redacted_event_holds_no_raw_value_anywhere() -> None:
    original = secret_event()
    redacted = REDACTOR.redact_event(original)
    dumped = redacted.model_dump_json()
    assert [raw for raw in RAW_VALUES if raw in dumped] == []
    governance = redacted.governance
    assert governance.redaction is RedactionStatus.REDACTED
    assert governance.labels == [
        "pii:email",
        "pii:iban",
        "pii:payment_card",
        "pii:phone",
        "secret:api_key",
    ]
    assert governance.redacted_fields == [
        "observation.messages[1].content",
        "observation.messages[2].tool_calls[0].arguments",
        "observation.content",
        "observation.data.caller.phone",
        "hidden.plan",
        "action.call.arguments",
        "outcome.tool_return.token",
        "outcome.tool_return.log[0]",
        "outcome.error_message",
    ]


def test_redaction_keeps_tool_arguments_valid_json_and_the_rest_intact() -> None:
    original = secret_event()
    redacted = REDACTOR.redact_event(original)
    arguments = json.loads(redacted.action.call.arguments)
    assert arguments == {
        "iban": "[REDACTED:IBAN]",
        "password": "[REDACTED:API_KEY]",
        "amount": 1299,
        "config": 'password="[REDACTED:API_KEY]" retries=3',
    }
    earlier = json.loads(redacted.observation.messages[2].tool_calls[0].arguments)
    assert earlier["customer"]["email"] == "[REDACTED:EMAIL]"
    assert redacted.observation.messages[0] == original.observation.messages[0]
    assert redacted.observation.tools == original.observation.tools
    assert redacted.observation.data == {"caller": {"phone": "[REDACTED:PHONE]", "tier": "gold"}}
    assert redacted.outcome.tool_return["id"] == 4411
    assert redacted.hidden.harness_fingerprint == "h-0001"
    assert (redacted.id, redacted.metadata) == (original.id, original.metadata)


def test_event_without_secrets_comes_back_clean_and_otherwise_equal() -> None:
    original = event(
        observation={"messages": [{"role": "user", "content": "Where is order 000123?"}]},
        action={"type": "message", "content": "It ships on 2026-11-30.", "token_ids": [1, 2]},
        outcome={"tool_return": {"status": "shipped", "eta": "2026-11-30", "total": 12.5}},
        governance={"labels": ["support"], "training": "debug_only"},
    )
    redacted = REDACTOR.redact_event(original)
    assert redacted.governance.redaction is RedactionStatus.CLEAN
    assert redacted.governance.redacted_fields == []
    assert redacted.governance.labels == ["support"]
    assert redacted.model_copy(update={"governance": original.governance}) == original
    assert redacted.governance.training is TrainingEligibility.DEBUG_ONLY


def test_an_event_redacted_before_stays_redacted_when_scanned_again() -> None:
    once = REDACTOR.redact_event(event(outcome={"error_message": f"no user {EMAIL}"}))
    twice = REDACTOR.redact_event(once)
    assert twice.governance.redaction is RedactionStatus.REDACTED
    assert twice.governance.redacted_fields == ["outcome.error_message"]
    assert twice == once


def test_redacting_message_text_drops_the_token_ids_that_spell_it() -> None:
    original = event(
        action={
            "type": "message",
            "content": f"Sure, I emailed {EMAIL}.",
            "token_ids": [11, 12, 13],
            "logprobs": [-0.1, -0.2, -0.3],
        }
    )
    redacted = REDACTOR.redact_event(original)
    assert redacted.action.content == "Sure, I emailed [REDACTED:EMAIL]."
    assert (redacted.action.token_ids, redacted.action.logprobs) == (None, None)
    assert redacted.governance.redacted_fields == ["action.content", "action.token_ids"]


def test_json_keys_and_numbers_are_redacted_without_collapsing_entries() -> None:
    original = event(
        outcome={"tool_return": {"a@x.io": 1, "b@y.io": 2, "card": 4111111111111111}},
    )
    redacted = REDACTOR.redact_event(original).outcome.tool_return
    assert redacted == {
        "[REDACTED:EMAIL]": 1,
        "[REDACTED:EMAIL]#2": 2,
        "card": "[REDACTED:PAYMENT_CARD]",
    }


def test_json_text_too_deep_to_walk_is_redacted_as_plain_text() -> None:
    content = "[" * 900 + json.dumps(EMAIL) + "]" * 900
    redacted = REDACTOR.redact_event(
        event(observation={"messages": [{"role": "user", "content": content}]})
    )
    assert redacted.observation.messages[0].content == content.replace(EMAIL, "[REDACTED:EMAIL]")


def test_hidden_text_stays_within_its_limit_after_placeholders_grow_it() -> None:
    plan = ("4111111111111111 " * 300)[: HIDDEN_TEXT_LIMIT - 1]
    redacted = REDACTOR.redact_event(event(hidden={"plan": plan}))
    assert len(redacted.hidden.plan) <= HIDDEN_TEXT_LIMIT
    assert "4111111111111111" not in redacted.hidden.plan


@given(S.events(TRAJECTORY, "acme"))
def test_any_event_redacts_to_a_valid_event_and_redacting_twice_changes_nothing(
    original: Event,
) -> None:
    once = REDACTOR.redact_event(original)
    assert Event.model_validate_json(once.model_dump_json()) == once
    assert once.governance.redaction in (RedactionStatus.CLEAN, RedactionStatus.REDACTED)
    assert (once.id, once.metadata, once.replay) == (
        original.id,
        original.metadata,
        original.replay,
    )
    assert REDACTOR.redact_event(once) == once


# --- policy ------------------------------------------------------------------------------

ELIGIBLE, DEBUG_ONLY, AUDIT_ONLY = (
    TrainingEligibility.ELIGIBLE,
    TrainingEligibility.DEBUG_ONLY,
    TrainingEligibility.AUDIT_ONLY,
)


@pytest.mark.parametrize(
    ("policy_training", "opt_out", "expected"),
    [
        (ELIGIBLE, False, ELIGIBLE),
        (ELIGIBLE, True, DEBUG_ONLY),
        (DEBUG_ONLY, False, DEBUG_ONLY),
        (DEBUG_ONLY, True, DEBUG_ONLY),
        (AUDIT_ONLY, False, AUDIT_ONLY),
        (AUDIT_ONLY, True, AUDIT_ONLY),
    ],
)
def test_opting_out_never_loosens_the_tenant_policy(
    policy_training: TrainingEligibility, opt_out: bool, expected: TrainingEligibility
) -> None:
    policy = TenantPolicy(training=policy_training)
    governance = decide_governance(policy, training_opt_out=opt_out, now=NOW)
    assert governance.training is expected


@pytest.mark.parametrize(
    ("retention_days", "expires_at"),
    [(None, None), (1, NOW + timedelta(days=1)), (30, datetime(2026, 12, 30, 10, tzinfo=UTC))],
)
def test_retention_sets_the_expiry_from_now(retention_days, expires_at) -> None:
    policy = TenantPolicy(retention_days=retention_days, consent=Consent.CONSENT)
    governance = decide_governance(policy, training_opt_out=False, now=NOW)
    assert governance.expires_at == expires_at
    assert governance.consent is Consent.CONSENT


def test_decided_governance_is_unscanned_and_unreviewed_with_sorted_labels() -> None:
    governance = decide_governance(
        TenantPolicy(), training_opt_out=False, now=NOW, labels=["pii", "finance", "pii"]
    )
    assert governance == Governance(labels=["finance", "pii"])
    assert governance.redaction is RedactionStatus.NOT_SCANNED
    assert governance.review is ReviewStatus.UNREVIEWED


@given(
    training=st.sampled_from(list(TrainingEligibility)),
    consent=st.sampled_from(list(Consent)),
    retention_days=st.none() | st.integers(1, 3650),
    opt_out=st.booleans(),
    now=st.datetimes(
        min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
    ),
)
def test_the_gateways_governance_document_is_the_decided_governance(
    training, consent, retention_days, opt_out, now
) -> None:
    policy = TenantPolicy(training=training, consent=consent, retention_days=retention_days)
    for _ in range(2):  # the second time from its cache
        document = governance_document(policy, training_opt_out=opt_out, now=now)
        decided = decide_governance(policy, training_opt_out=opt_out, now=now)
        assert Governance.model_validate(document) == decided
        document["labels"].append("changed by a caller")  # a caller's copy is its own


def test_naive_now_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        decide_governance(
            TenantPolicy(retention_days=7), training_opt_out=False, now=datetime(2026, 11, 30)
        )


@st.composite
def spelled(draw, words: list[str]) -> str:
    """One of `words`, in any mix of upper and lower case, with stray blanks around it."""
    word = draw(st.sampled_from(words))
    upper = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
    blank = draw(st.sampled_from(["", " ", "\t"]))
    cased = "".join(char.upper() if up else char for char, up in zip(word, upper, strict=True))
    return f"{blank}{cased}{blank}"


@given(spelled(["off", "false", "0", "no"]))
def test_training_header_opt_out_words(value: str) -> None:
    assert parse_training_header(value) is True


@given(spelled(["on", "true", "1", "yes"]))
def test_training_header_opt_in_words(value: str) -> None:
    assert parse_training_header(value) is False


def test_missing_training_header_follows_the_policy() -> None:
    assert parse_training_header(None) is False


ACCEPTED = {"off", "false", "0", "no", "on", "true", "1", "yes"}


@given(st.text(max_size=12).filter(lambda value: value.strip().lower() not in ACCEPTED))
def test_unknown_training_header_values_are_refused_with_the_accepted_ones(value: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_training_header(value)
    message = str(raised.value)
    assert "X-Evoplane-Training" in message
    assert all(word in message for word in ("off", "false", "0", "no", "on", "true", "yes"))
