"""A pharmacy chain's assistant, in Portuguese: prescriptions, deliveries, opening hours.

Three branches run it. Their customers write Portuguese and never rate or report anything:
when an answer is wrong they say so in one message ("Não está certo.") and, once the
assistant answers that, say what is right in the next. The team's agent is on Anthropic's
Messages API and reports nothing.
"""

from __future__ import annotations

import random
import re

from evoplane.scenarios.world import Fact, Slot, Task, TaskKind, Tool, World
from evoplane.scenarios.worlds.common import object_schema, ok, question, string

__all__ = ["TENANTS", "pharmacy"]

TENANTS = ("centro", "porto", "oeste")
INSTRUCTIONS = (
    "Você é o assistente de uma rede de farmácias. Reserve medicamentos com a ferramenta e "
    "responda às perguntas dos clientes. A farmácia fecha às 20:00. "
    "As entregas em casa chegam em 2 dias úteis."
)
DENIALS = (
    "Não está certo.",
    "Isso não é verdade.",
    "Não, está errado.",
    "Hmm, não é isso.",
    "Acho que você se enganou.",
)


def pharmacy(*, closing: dict[str, str] | None = None) -> World:
    """The pharmacy world; `closing`: each branch's real closing time (the instructions say
    20:00)."""
    hours = {tenant: "20:00" for tenant in TENANTS} | (closing or {})
    return World(
        name="pharmacy",
        tenants=TENANTS,
        instructions=INSTRUCTIONS,
        tools=_tools(),
        slots={"medicine": Slot("medicine", {"as_is": lambda v: v}, "as_is")},
        facts={"closing": _closing(hours), "delivery": _delivery()},
        wanted={},
        kinds={kind.name: kind for kind in _kinds()},
        denials=DENIALS,
    )


def _tools() -> dict[str, Tool]:
    hold = Tool(
        "reserve_medicine",
        "Reserve a medicine for pickup at the branch.",
        object_schema(medicine=string("The medicine's name.")),
        {"medicine": "medicine"},
        lambda tenant, args: ok(f"{args.get('medicine')} está reservado para retirada."),
    )
    return {hold.name: hold}


def _closing(hours: dict[str, str]) -> Fact:
    return Fact(
        key="closing",
        topic=re.compile(r"fecha|aberta|abert|horário|hora", re.I),
        value=re.compile(r"(\d{1,2}:\d{2})"),
        values=hours,
        guess="A farmácia fecha às 20:00.",
        answer="A farmácia fecha às {value}.",
        statements=(
            "A farmácia agora fecha às {value}.",
            "Vocês fecham às {value}, está na porta.",
            "O horário mudou, fecha às {value}.",
            "Fiquei sabendo que a loja fica aberta até as {value}.",
            "A farmácia funciona até as {value} agora.",
        ),
    )


def _delivery() -> Fact:
    return Fact(
        key="delivery",
        topic=re.compile(r"entrega|chega", re.I),
        value=re.compile(r"(\d+)\s*dias", re.I),
        values={tenant: "2" for tenant in TENANTS},
        guess="As entregas chegam em 5 dias.",
        answer="As entregas em casa chegam em {value} dias úteis.",
        statements=("As entregas chegam em {value} dias úteis.",),
    )


def _kinds() -> list[TaskKind]:
    return [
        TaskKind("closing", question("closing", _CLOSING_QUESTIONS)),
        TaskKind("delivery", question("delivery", _DELIVERY_QUESTIONS)),
        TaskKind("reserve", _reserve_task),
    ]


def _reserve_task(rng: random.Random, tenant: str) -> Task:
    medicine = rng.choice(("Paracetamol", "Ibuprofeno", "Amoxicilina", "Loratadina"))
    text = rng.choice(
        ("Pode reservar {m} para mim?", "Quero reservar {m} para retirar hoje.")
    ).format(m=medicine)
    return Task("reserve", text, {"medicine": medicine}, tool="reserve_medicine")


_CLOSING_QUESTIONS = (
    "Até que horas a farmácia está aberta hoje?",
    "A que horas vocês fecham?",
    "Qual é o horário de fechamento da farmácia?",
    "Ainda dá tempo de passar na farmácia à noite? Até quando fica aberta?",
)
_DELIVERY_QUESTIONS = ("Quanto tempo demora a entrega em casa?", "Em quantos dias chega a entrega?")
