"""The support desk: the shops (tenants), what their customers ask, and what a right answer is.

Four shops run the same support bot on one commerce platform. Customers ask for one of four
things a tool does (order status, refund, cancellation, complaint) or ask a question that a
known fact answers. Everything the tiny model must decide is short and closed: which tool,
which argument name, and whether a fact line in its context answers the question. Values
such as order numbers come from the agent's own code (tools take `"latest"`, the ticket's
order), so the model never has to copy one.

The warm start (`evoplane.demo.warm_start`), the agents, the user simulator and the drifts
all read this module, so what the model was taught and what the demo asks stay in step.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ACK",
    "AGENT",
    "BASE_FACTS",
    "BASE_INSTRUCTIONS",
    "COMPANIES",
    "FACTS",
    "FALLBACK",
    "HARD",
    "HOTFIX_INSTRUCTIONS",
    "NORMAL",
    "TOOL_OF",
    "Fact",
    "Intent",
    "agent_system",
    "told_fact",
    "tools_of",
]

AGENT = "support-bot"

COMPANIES = {
    "acme": "Acme Outdoor",
    "globex": "Globex Electronics",
    "initech": "Initech Office",
    "umbrella": "Umbrella Pharmacy",
}


class Intent(StrEnum):
    """What a customer wants; also the trajectory's task type."""

    ORDER_STATUS = "order_status"
    REFUND = "refund"
    CANCEL = "cancel"
    COMPLAINT = "complaint"
    QUESTION = "question"


TOOL_OF = {
    Intent.ORDER_STATUS: "lookup_order",
    Intent.REFUND: "refund",
    Intent.CANCEL: "cancel_order",
    Intent.COMPLAINT: "escalate",
}

# Initech sells to businesses on account and takes no cancellations: a second tool setup.
_NO_CANCEL = frozenset({"initech"})


def tools_of(tenant: str) -> list[str]:
    """The tools a shop's agent offers, in the order it lists them."""
    names = ["lookup_order", "refund", "cancel_order", "escalate"]
    return [name for name in names if not (name == "cancel_order" and tenant in _NO_CANCEL)]


def intents_of(tenant: str) -> list[Intent]:
    """The tool intents a shop's customers have (no cancellations where there is no tool)."""
    return [intent for intent, tool in TOOL_OF.items() if tool in tools_of(tenant)]


# How customers have always asked: the warm start learned these well.
NORMAL: dict[Intent, list[str]] = {
    Intent.ORDER_STATUS: [
        "Where is my order?",
        "Has my parcel shipped yet?",
        "Can you track my package?",
        "When will my order arrive?",
        "What is the status of my delivery?",
        "My order has not arrived yet.",
    ],
    Intent.REFUND: [
        "I want a refund.",
        "Please refund my order.",
        "Can I get my money back?",
        "The item arrived broken, I want a refund.",
        "I returned the parcel, please refund me.",
        "Refund me please.",
    ],
    Intent.CANCEL: [
        "Please cancel my order.",
        "I want to cancel the order.",
        "Cancel it, I changed my mind.",
        "Can you stop my order before it ships?",
        "I would like to cancel my purchase.",
        "Please do not ship my order, cancel it.",
    ],
    Intent.COMPLAINT: [
        "I want to speak to a manager.",
        "This is unacceptable, let me talk to a human.",
        "I want to file a complaint.",
        "Get me a supervisor.",
        "Your service is terrible.",
        "I am very unhappy with how this was handled.",
    ],
}

# How a new wave of customers writes (terse, slang, German): the skill gap. The warm start
# saw these with labels that were right only part of the time, as a model would after a
# little noisy data, so it picks the right tool for them about half the time.
HARD: dict[Intent, list[str]] = {
    Intent.ORDER_STATUS: [
        "yo wheres my stuff",
        "pkg status??",
        "still waiting smh",
        "wo ist mein paket",
        "tracking pls",
    ],
    Intent.REFUND: [
        "money back now",
        "want my cash back",
        "geld zurueck bitte",
        "u owe me $$",
        "reimburse pls",
    ],
    Intent.CANCEL: [
        "nvm dont send it",
        "scrap the order",
        "stornieren bitte",
        "kill my order",
        "dont want it anymore",
    ],
    Intent.COMPLAINT: [
        "worst shop ever",
        "human pls",
        "ich will einen menschen",
        "manager. now.",
        "ur bot is useless",
    ],
}


@dataclass(frozen=True)
class Fact:
    """A fact line and the questions it answers.

    `line` is exactly what users write after "No, " when they correct the agent, so the
    memory operator distils it word for word, and what a right answer says. `told` is what
    customers who know the fact from their own experience write instead: their own
    circumstances, which say the fact to a person who knows the shop and to no reading of
    the words alone (the review round's customers).
    """

    topic: str
    line: str
    questions: tuple[str, ...]
    told: tuple[str, ...] = ()

    @property
    def correction(self) -> str:
        """A user's correcting next turn: the gateway reads it as an implicit correction."""
        return f"No, {self.line[0].lower()}{self.line[1:]}"


FACTS: dict[str, Fact] = {
    fact.topic: fact
    for fact in (
        Fact(
            "holiday",
            "Holiday purchases can be returned until January 31.",
            (
                "Can I still return a holiday gift?",
                "How long can I return holiday purchases?",
                "Until when can holiday orders be returned?",
                "Is there a deadline for holiday returns?",
            ),
        ),
        Fact(
            "invoice",
            "Business customers can pay by invoice within 30 days.",
            (
                "Can I pay by invoice?",
                "Do you accept payment on invoice?",
                "Can my company pay with an invoice?",
                "Is paying by invoice possible?",
            ),
        ),
        Fact(
            "hotline",
            "The hotline is open on weekdays from 8 to 18.",
            (
                "When is your hotline open?",
                "Can I call you on Sunday?",
                "What are your phone hours?",
                "When can I reach the hotline?",
            ),
        ),
        Fact(
            "giftcard",
            "Gift cards are valid for three years.",
            (
                "Do gift cards expire?",
                "How long is a gift card valid?",
                "Is my old gift card still good?",
                "When does a gift card run out?",
            ),
        ),
        Fact(
            "shipping",
            "We ship to all EU countries and to Norway.",
            (
                "Do you ship to Norway?",
                "Which countries do you deliver to?",
                "Can you send my order abroad?",
                "Do you deliver outside the EU?",
            ),
            (
                "My sister in Oslo gets her orders from you all the time.",
                "My last parcel from you reached Bergen in three days.",
                "I have had three orders delivered to my flat in Norway.",
                "My cousin in Tromsø ordered a kettle from you last month.",
            ),
        ),
        Fact(
            "warranty",
            "Electronics come with a two-year warranty.",
            (
                "How long is the warranty?",
                "Is my laptop still under warranty?",
                "What warranty do electronics have?",
                "Does the warranty cover two years?",
            ),
        ),
    )
}


def told_fact(text: str) -> Fact | None:
    """The fact a customer's own story says, as a person who knows the shop reads it."""
    return next((fact for fact in FACTS.values() if text in fact.told), None)


# What the agent says when no fact in its context answers a question, and how it
# acknowledges a correction.
FALLBACK = "Let me check that for you."
ACK = "Thank you, I have noted that."

# Facts every shop's agent has in its instructions from the start.
BASE_FACTS = ("hotline", "giftcard")

BASE_INSTRUCTIONS = (
    "Call one tool per request. Answer questions with these facts only:\n"
    + "\n".join(f"- {FACTS[topic].line}" for topic in BASE_FACTS)
)


# A person's shorter rewrite of the instructions (the rollback round's hotfix): no facts.
HOTFIX_INSTRUCTIONS = "Be brief and use the tools."


def agent_system(tenant: str) -> str:
    """The system message a shop's agent sends with every request (its own, not the harness)."""
    return f"You are {COMPANIES[tenant]}'s support assistant."
