"""The scenarios: each injects one failure (or none) into a world and says what should follow.

A scenario passes when every evolution chooses the expected action and, where a fix exists,
the fix is promoted and the scenario's own tasks go from at most 50% solved first time
before it to at least 90% after it, on fresh traffic; where nothing should be promoted,
nothing is. The worlds and their users are in `evoplane.scenarios.worlds`; nothing here is
read by the control plane.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from evoplane.scenarios.agent import AgentStyle
from evoplane.scenarios.users import FeedbackStyle
from evoplane.scenarios.world import World
from evoplane.scenarios.worlds.clinic import clinic
from evoplane.scenarios.worlds.helpdesk import helpdesk
from evoplane.scenarios.worlds.onboarding import onboarding
from evoplane.scenarios.worlds.parcels import parcels
from evoplane.scenarios.worlds.pharmacy import pharmacy
from evoplane.scenarios.worlds.restaurant import restaurant
from evoplane.scenarios.worlds.travel import INSTRUCTIONS as TRAVEL_INSTRUCTIONS
from evoplane.scenarios.worlds.travel import travel

__all__ = ["CI_SUBSET", "SCENARIOS", "Expect", "Load", "Scenario", "by_name"]


@dataclass(frozen=True)
class Load:
    """A share of the traffic: one task kind, asked by users of some tenants (None: all)."""

    kind: str
    weight: float
    tenants: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Expect:
    """What one evolution should do.

    Args:
        actions: the right actions (usually one; a routing confusion has two right fixes).
        fixes: a fix exists: it must be promoted and lift `target` to >= 0.9 from <= 0.5.
        target: the task kinds whose first-time success the fix is judged on.
    """

    actions: tuple[str, ...]
    fixes: bool
    target: tuple[str, ...] = ()


Plan = Literal["policy", "candidate", "hotfix"]


@dataclass(frozen=True)
class Scenario:
    """One injected failure in one world, and what the control plane should do about it.

    Args:
        world: builds the world as it is once the failure is in (the drift applied).
        traffic: the traffic while the failure is in.
        sessions: sessions before each evolution.
        wants: tenant -> what its users want of every answer (instruction names).
        plan: "policy" lets the control plane decide; "candidate" evaluates a person's
            candidate (`change` applied to stable's spec) through the gates; "hotfix"
            promotes a person's candidate with the gates skipped, then lets the control
            plane decide.
    """

    name: str
    story: str
    world: Callable[[], World]
    traffic: tuple[Load, ...]
    expect: tuple[Expect, ...]
    sessions: int = 60
    wants: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    plan: Plan = "policy"
    change: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    feedback: FeedbackStyle = FeedbackStyle()
    agent: AgentStyle = AgentStyle()

    @property
    def domain(self) -> str:
        return self.world().name


# How each world's users and agent behave (see the world modules).
_TRAVELLERS = FeedbackStyle(channel="turn", rating="score", rate_good=0.7)
# The three teams speak the three protocols the gateway serves.
_TRAVEL_AGENT = AgentStyle(task_types=True, protocol="responses")
_EMPLOYEES = FeedbackStyle(channel="turn", rating="thumbs", rate_good=0.6)
_HELPDESK_AGENT = AgentStyle(reports_tools=True, reports_outcome=True)
_PATIENTS = FeedbackStyle(channel="box", rating="thumbs", rate_good=0.6)
_CLINIC_AGENT = AgentStyle(streams=True, task_types=True, protocol="messages")

_TRAVEL_BASE = (Load("booking", 0.15), Load("checkin", 0.1), Load("search", 0.15))
_HELPDESK_BASE = (Load("ticket", 0.2), Load("hours", 0.15))
_CLINIC_BASE = (Load("cancel_visit", 0.2), Load("cancel", 0.15))
# Users who never rate: they only write (Japanese guests, Portuguese customers).
_SILENT = FeedbackStyle(channel="turn", rating="none", rate_good=0.0)
_DENYING = FeedbackStyle(channel="turn", rating="none", rate_good=0.0, deny_first=0.8)
_SENDERS = FeedbackStyle(channel="turn", rating="thumbs", rate_good=0.5)
_MANAGERS = FeedbackStyle(channel="turn", rating="thumbs", rate_good=0.5)
_ONBOARDING_AGENT = AgentStyle(task_types=True, reports_outcome=True)


def _travel(**kw: Any) -> dict[str, Any]:
    return {"feedback": _TRAVELLERS, "agent": _TRAVEL_AGENT, **kw}


def _helpdesk(**kw: Any) -> dict[str, Any]:
    return {"feedback": _EMPLOYEES, "agent": _HELPDESK_AGENT, **kw}


def _clinic(**kw: Any) -> dict[str, Any]:
    return {"feedback": _PATIENTS, "agent": _CLINIC_AGENT, **kw}


def _german(spec: dict[str, Any]) -> dict[str, Any]:
    harness = spec["harness"]
    said = f"{harness['instructions']} Always answer in German (Deutsch)."
    return {**spec, "harness": {**harness, "instructions": said}}


def _terse(spec: dict[str, Any]) -> dict[str, Any]:
    """A person's hot-fix: shorter instructions, fewer tokens; the facts are gone."""
    short = TRAVEL_INSTRUCTIONS.split(". Online")[0] + ". Be brief."
    return {**spec, "harness": {**spec["harness"], "instructions": short}}


SCENARIOS: tuple[Scenario, ...] = (
    # --- missing facts ---------------------------------------------------------------------
    Scenario(
        "fact_shared",
        "every practice's patients ask about fasting before blood tests, which no "
        "instruction states, and correct the answer",
        lambda: clinic(),
        (Load("fasting", 0.55), *_CLINIC_BASE, Load("book", 0.1)),
        (Expect(("memory",), True, ("fasting",)),),
        **_clinic(),
    ),
    Scenario(
        "fact_one_tenant",
        "one agency raises its baggage allowance to 30 kg; the instructions still say 23",
        lambda: travel(baggage={"bluewave": "30"}),
        (Load("baggage", 0.5, ("bluewave",)), Load("baggage", 0.1), *_TRAVEL_BASE),
        (Expect(("memory",), True, ("baggage@bluewave",)),),
        **_travel(),
    ),
    Scenario(
        "fact_conflict",
        "two companies' employees each correct the VPN address, with different addresses",
        lambda: helpdesk(
            vpn={"northwind": "remote-eu.example.net", "contoso": "gw.contoso-remote.example.net"}
        ),
        (Load("vpn", 0.55, ("northwind", "contoso")), *_HELPDESK_BASE, Load("password", 0.1)),
        (Expect(("memory",), True, ("vpn",)),),
        **_helpdesk(),
    ),
    # --- tool arguments ----------------------------------------------------------------------
    Scenario(
        "tool_format_some",
        "the flight API now takes only YYYY-MM-DD dates; travellers who type ISO dates succeed",
        lambda: travel(strict_dates=True),
        (Load("search", 0.55), Load("booking", 0.15), Load("checkin", 0.15), Load("baggage", 0.15)),
        (Expect(("tool_schema",), True, ("search",)),),
        **_travel(),
    ),
    Scenario(
        "tool_format_none",
        "the identity API now takes only EMP-12345 ids; every reset is refused, each refusal "
        "stating the format",
        lambda: helpdesk(strict_ids=True),
        (Load("password", 0.55), *_HELPDESK_BASE, Load("vpn", 0.1)),
        (Expect(("tool_schema",), True, ("password",)),),
        **_helpdesk(),
    ),
    Scenario(
        "renamed_parameter",
        "the booking API renamed `patient` to `patient_number`; the agent still declares `patient`",
        lambda: clinic(renamed_patient=True),
        (Load("book", 0.55), *_CLINIC_BASE, Load("fasting", 0.1)),
        (Expect(("tool_schema",), True, ("book",)),),
        **_clinic(),
    ),
    Scenario(
        "enum_values",
        "the cabin API accepts only its codes (economy, premium_economy, business); "
        "travellers say coach, premium, biz",
        lambda: travel(strict_cabins=True),
        (Load("cabin", 0.55), *_TRAVEL_BASE),
        (Expect(("tool_schema",), True, ("cabin",)),),
        **_travel(),
    ),
    Scenario(
        "similar_tools",
        "a refactor describes the password and authenticator resets alike; the model mostly "
        "resets the password, listed first",
        lambda: helpdesk(vague_tools=True),
        (Load("authenticator", 0.5), Load("password", 0.15), *_HELPDESK_BASE),
        (Expect(("harness", "tool_schema"), True, ("authenticator",)),),
        **_helpdesk(),
    ),
    # --- instructions ----------------------------------------------------------------------
    Scenario(
        "instruction_free_text",
        "travellers keep asking, in their own words, to have the date confirmed back, and "
        "score the answer 0",
        lambda: travel(),
        (Load("search", 0.6), Load("booking", 0.15), Load("checkin", 0.1), Load("baggage", 0.15)),
        (Expect(("harness",), True, ("search",)),),
        wants={tenant: ("confirm_date",) for tenant in ("skyways", "railjet", "bluewave")},
        **_travel(),
    ),
    Scenario(
        "instruction_categorised",
        "patients want to be told what to bring, and say so with the widget's category",
        lambda: clinic(),
        (Load("book", 0.6), *_CLINIC_BASE),
        (Expect(("harness",), True, ("book",)),),
        wants={tenant: ("bring",) for tenant in ("riverside", "oakwood", "lakeside")},
        **_clinic(feedback=FeedbackStyle(channel="box", rating="thumbs", categories=True)),
    ),
    # --- people's changes ------------------------------------------------------------------
    Scenario(
        "manual_regression",
        "a person hot-fixes the instructions, shorter, skipping the gates; the facts they "
        "held are gone",
        lambda: travel(),
        (Load("checkin", 0.3), Load("baggage", 0.3), Load("search", 0.2), Load("booking", 0.2)),
        (Expect(("rollback",), True, ("checkin", "baggage")),),
        # The regression check needs 30 rewards on each side of the hot-fix; travellers rate
        # most good answers and every bad one, so 60 sessions give 40 to 50.
        sessions=60,
        plan="hotfix",
        change=_terse,
        **_travel(),
    ),
    Scenario(
        "helps_two_hurts_third",
        "a person's candidate answers in German: two practices' patients want that, the "
        "third's cannot read it",
        lambda: clinic(),
        (Load("book", 0.3), Load("cancel", 0.35), Load("cancel_visit", 0.35)),
        (Expect(("harness",), False),),
        sessions=40,
        wants={"riverside": ("german",), "oakwood": ("german",), "lakeside": ("english",)},
        plan="candidate",
        change=_german,
        **_clinic(),
    ),
    # --- nothing to do ---------------------------------------------------------------------
    Scenario(
        "healthy",
        "ordinary traffic with the model's random mistakes only",
        lambda: clinic(),
        (Load("book", 0.3), Load("cancel_visit", 0.35), Load("cancel", 0.35)),
        (Expect(("noop",), False),),
        **_clinic(),
    ),
    Scenario(
        "thin_traffic",
        "the date format breaks, but only a handful of sessions have come in yet",
        lambda: travel(strict_dates=True),
        (Load("search", 0.6), Load("booking", 0.4)),
        (Expect(("noop",), False),),
        sessions=12,
        **_travel(),
    ),
    # --- procedures ------------------------------------------------------------------------
    Scenario(
        "procedure_guided",
        "managers walk the agent through onboarding step by step, and at the third step "
        "every one of them has to tell it to grant building access before the welcome",
        lambda: onboarding(),
        (Load("onboard", 0.6), Load("laptop", 0.25), Load("opening", 0.15)),
        (Expect(("skill",), True, ("onboard",)),),
        feedback=_MANAGERS,
        agent=_ONBOARDING_AGENT,
    ),
    # --- users who say it quietly ------------------------------------------------------------
    Scenario(
        "asked_back_silent",
        "guests of three restaurants, writing Japanese and never rating anything, have to "
        "ask in their next message for the date and time their table was booked for",
        lambda: restaurant(),
        (Load("reserve", 0.6), Load("cancel", 0.2), Load("lunch", 0.2)),
        (Expect(("harness",), True, ("reserve",)),),
        wants={tenant: ("confirm_booking",) for tenant in ("sakura", "kaede", "momiji")},
        feedback=_SILENT,
        agent=AgentStyle(),
    ),
    Scenario(
        "denied_then_stated",
        "a pharmacy chain now closes at 22:00; customers, writing Portuguese and never "
        "rating, first only say the answer is wrong, and what is right in their next message",
        lambda: pharmacy(closing={tenant: "22:00" for tenant in ("centro", "porto", "oeste")}),
        (Load("closing", 0.55), Load("delivery", 0.2), Load("reserve", 0.25)),
        (Expect(("memory",), True, ("closing",)),),
        feedback=_DENYING,
        agent=AgentStyle(protocol="messages"),
    ),
    Scenario(
        "own_values_instruction",
        "customers of a parcel carrier, writing Polish, press a thumb down and ask that "
        "every answer quote their parcel number, each with their own number",
        lambda: parcels(),
        (Load("track", 0.45), Load("redeliver", 0.2), Load("lockers", 0.35)),
        (Expect(("harness",), True, ("track", "redeliver")),),
        wants={tenant: ("quote_parcel",) for tenant in ("sklep-a", "sklep-b", "sklep-c")},
        feedback=_SENDERS,
        agent=AgentStyle(task_types=True, protocol="responses"),
    ),
    # --- two at once -----------------------------------------------------------------------
    Scenario(
        "two_failures",
        "passwords now expire every 60 days (nobody told the agent) and the identity API "
        "takes only EMP-12345 ids: the larger first, the other next",
        lambda: helpdesk(strict_ids=True, rotation_days="60"),
        (Load("rotation", 0.45), Load("password", 0.25), *_HELPDESK_BASE),
        (
            Expect(("memory",), True, ("rotation",)),
            Expect(("tool_schema",), True, ("password",)),
        ),
        **_helpdesk(),
    ),
)
CI_SUBSET = (
    "fact_shared",
    "tool_format_none",
    "instruction_free_text",
    "procedure_guided",
    "asked_back_silent",
)


def by_name(names: list[str] | None = None) -> list[Scenario]:
    """The scenarios to run, in the suite's order (all when `names` is empty)."""
    known = {scenario.name: scenario for scenario in SCENARIOS}
    unknown = [name for name in names or [] if name not in known]
    if unknown:
        raise ValueError(f"unknown scenarios {unknown}; the suite has {list(known)}")
    return [scenario for scenario in SCENARIOS if not names or scenario.name in names]
