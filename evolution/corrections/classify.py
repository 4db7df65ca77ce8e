"""What a user's correction is about: a missing fact, an instruction, the tools, or other.

Users correct an agent in their own words and languages, rarely with a category. This is
the offline reading (no model): it looks at the shape of what they wrote, never at any
domain's vocabulary.

- A statement that carries a specific value (a number, a code, an address, a quoted name)
  supplies a fact: "It's 30 kg now", "the portal is vpn.example.net".
- A directive about how to answer ("always...", "next time...", "you forgot...") is an
  instruction, whatever values it carries; so is a request whose values are the user's
  own (`own`: values one session alone states, such as their reference number): "please
  quote my reference BK-1" asks for something of every answer, it states no fact.
- Words of a tool the agent was offered ("you reset my password") point at tool use.
- A request about how to answer ("please always...", "can you...", "next time...",
  "bitte...", "pouvez-vous...") is an instruction the agent's harness lacks.
- A general statement without a value is a fact; a personal one ("my phone is new") says
  only that the task failed.

A category the user picked (`wrong_tool`, `incorrect_information`, `policy`, ...) is the
user's own reading: read word by word, it decides whenever it names a kind.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from enum import StrEnum

from evolution.corrections.words import content_words
from runtime.lexicon import Cue, cues

__all__ = ["CorrectionKind", "category_kind", "classify", "specifics", "tool_words"]


class CorrectionKind(StrEnum):
    MISSING_FACT = "missing_fact"
    INSTRUCTION = "instruction"
    TOOL_USE = "tool_use"
    OTHER = "other"


# Values a fact carries: anything with a digit, a host or address, an email, a quoted name.
# Letters of a value's token: word characters but those of scripts written without spaces,
# so "3月14日" is the values 3 and 14, not one token with the sentence around it.
_V = r"[^\W\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff\u0e00-\u0e7f\uac00-\ud7af]"
_SPECIFIC = re.compile(
    r"(?:https?://\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:[a-z0-9-]+\.)+[a-z]{2,}\b"
    rf"|[\"“«`][^\"”»`]{{2,40}}[\"”»`]|(?<!{_V})(?:{_V}|[./:-])*\d(?:{_V}|[./:-])*)",
    re.IGNORECASE,
)
# Values a fact denies ("30 kg, not 23"): not part of what it asserts.
_DENIED = re.compile(r"\b(?:not|never|instead of|rather than|no longer|nicht|pas|no)\s+(\S+)", re.I)
# Requests about how the agent should answer, in the languages users most often write.
_ASK = re.compile(
    r"\b(?:please|pls|can you|could you|would you|will you|can u|i need you to|i want you to"
    r"|i'?d like you to|i would like you to|make sure|remember to|don'?t forget|next time"
    r"|from now on|in (?:the )?future|you should|you never|you forgot|you didn'?t"
    r"|it would help|would be (?:nice|great|helpful)|let me know|tell me"
    r"|bitte|nächstes mal|künftig|können sie|könnten sie|kannst du|sagen sie|sag mir"
    r"|s'il vous pla[iî]t|s'il te pla[iî]t|svp|pouvez-vous|pourriez-vous|peux-tu"
    r"|la prochaine fois|merci de|dites-moi|por favor|puede|podr[ií]a|la pr[oó]xima vez"
    r"|dime|per favore|potresti|alsjeblieft)\b",
    re.IGNORECASE,
)
# Directives about every answer from now on, however polite.
_DIRECTIVE = re.compile(
    r"\b(?:next time|from now on|in (?:the )?future|make sure|remember to|don'?t forget"
    r"|you forgot|you didn'?t|you never|nächstes mal|künftig|in zukunft|ab jetzt"
    r"|la prochaine fois|à l'avenir|désormais|la pr[oó]xima vez|en adelante"
    r"|a partir de ahora|la prossima volta|d'ora in poi|da pr[oó]xima vez)\b",
    re.IGNORECASE,
)
# "Always"/"never" make a request only when addressed to the agent ("always ... with me");
# "passwords never expire" is a statement.
_HABIT = re.compile(
    r"\b(?:always|never|immer|niemals|toujours|jamais|siempre|nunca|sempre|altijd)\b", re.I
)
_ADDRESSED = re.compile(r"\b(?:you|your|me|sie|du|mir|mich|vous|tu|moi|usted|t[uú])\b", re.I)
# A sentence that opens with a verb telling the agent what to do: "Keep answers short."
_IMPERATIVE = re.compile(
    r"^\W*(?:keep|stop|use|write|answer|reply|respond|say|tell|give|include|mention|add|list"
    r"|confirm|repeat|check|ask|avoid|be|don'?t|make|put|show|explain|summari[sz]e|start"
    r"|end|send|read|double-check|remind|quote|state)\b",
    re.IGNORECASE | re.MULTILINE,
)
# A fact handed over as a request: "please note that the office moved".
_NOTE = re.compile(
    r"\b(?:note that|remember that|fyi|for your information|just so you know|zur info"
    r"|pour info|para tu informaci[oó]n)\b",
    re.IGNORECASE,
)
# A request about the answers themselves: "I'd like the answer to mention the next step".
_ABOUT_ANSWERS = re.compile(
    r"\b(?:i'?d like|i would like|i want|i'?d prefer|i prefer|should|needs? to)\b.{0,60}"
    r"\b(?:answers?|repl(?:y|ies)|responses?|antwort\w*|réponses?|respuestas?)\b"
    r"|\b(?:answers?|repl(?:y|ies)|responses?)\b.{0,60}\b(?:should|needs? to|must)\b",
    re.IGNORECASE,
)
# A sentence about the exchange itself ("That didn't work"), not about the world.
_DEICTIC = re.compile(r"^\W*(?:that|this|it|das|ça|cela|eso|esto)\b", re.IGNORECASE)
_PERSONAL = re.compile(
    r"\b(?:i|i'm|i've|my|me|mine|ich|mein\w*|mir|je|j'|mon|ma|mes|yo|mi)\b", re.I
)
_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)

_CATEGORY_WORDS = {
    CorrectionKind.TOOL_USE: {"tool", "tools", "function", "routing", "call", "calls"},
    CorrectionKind.INSTRUCTION: {
        "instruction", "instructions", "follow", "followed", "request", "asked", "format",
        "formatting", "style", "tone", "length", "verbose", "verbosity", "policy", "language",
        "steps",
    },
    CorrectionKind.MISSING_FACT: {
        "fact", "facts", "information", "info", "incorrect", "inaccurate", "outdated",
        "missing", "knowledge", "hallucination", "hallucinated", "wrong_fact",
    },
}  # fmt: skip
# Tool-name words too common to say which tool was meant.
_GENERIC_TOOL_WORDS = frozenset(
    {"get", "set", "do", "run", "make", "new", "the", "for", "and", "by", "of", "to", "data"}
)


def specifics(text: str) -> frozenset[str]:
    """The values `text` asserts, lowercased, without those it denies."""
    denied = {match.group(1).strip(".,;:!?").lower() for match in _DENIED.finditer(text)}
    found = {match.group(0).strip(".,;:!?\"'`“”«»").lower() for match in _SPECIFIC.finditer(text)}
    return frozenset(value for value in found if value and value not in denied)


def tool_words(name: str) -> frozenset[str]:
    """The words of a tool's name that say what it does ("reset_login": reset, login)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").replace("-", " ")
    words = {word.lower() for word in spaced.split()}
    return frozenset(w for w in words if len(w) >= 3 and w not in _GENERIC_TOOL_WORDS)


def category_kind(category: str | None) -> CorrectionKind | None:
    """The kind a feedback category names, read word by word; None when it names none."""
    if not category:
        return None
    spelled = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", category.strip()).lower()
    words = set(re.split(r"[^a-z0-9]+", spelled)) | {spelled}
    for kind, known in _CATEGORY_WORDS.items():  # tool words first: "wrong_tool" is not a fact
        if words & known:
            return kind
    return None


def classify(
    text: str,
    *,
    tools: Collection[str] = (),
    category: str | None = None,
    own: Collection[str] = (),
) -> CorrectionKind:
    """What `text`, a user's correction, is about.

    Args:
        tools: the names of the tools the agent offered in that conversation.
        category: the feedback category the user picked with it, if any.
        own: values of `text` (lowercased, as `specifics` gives them) that are the user's
            own rather than a fact's: a request carrying only these is an instruction.
    """
    return category_kind(category) or _from_text(text, tools, frozenset(own))


def _from_text(text: str, tools: Collection[str], own: frozenset[str]) -> CorrectionKind:
    """The first reading that applies, strongest evidence first."""
    if not _WORD.search(text):
        return CorrectionKind.OTHER
    if _NOTE.search(text):
        return CorrectionKind.MISSING_FACT
    if _directs(text):
        return CorrectionKind.INSTRUCTION
    values = specifics(text)
    if values - own:
        return CorrectionKind.MISSING_FACT
    if any(name and name.lower() in text.lower() for name in tools):
        return CorrectionKind.TOOL_USE
    if _requests(text, own=bool(values)):
        return CorrectionKind.INSTRUCTION
    if values and not text.rstrip().endswith("?"):  # their own values, stated: a fact
        return CorrectionKind.MISSING_FACT
    if _names_tool_word(text, tools):
        return CorrectionKind.TOOL_USE
    if text.rstrip().endswith("?") or _PERSONAL.search(text) or _DEICTIC.match(text):
        return CorrectionKind.OTHER
    # A general statement states a fact when it says something: two words that mean anything
    # ("Passwords never expire"), not "Nope, that is not it".
    return CorrectionKind.MISSING_FACT if len(content_words(text)) >= 2 else CorrectionKind.OTHER


def _directs(text: str) -> bool:
    """It tells the agent how to answer from now on: a directive, an addressed habit, or a
    request about the answers themselves."""
    return bool(
        _DIRECTIVE.search(text)
        or _ABOUT_ANSWERS.search(text)
        or (_HABIT.search(text) and _ADDRESSED.search(text))
    )


def _requests(text: str, *, own: bool = False) -> bool:
    """It asks the agent to do something: a request (in any of the follow-up lexicon's
    languages), an addressed habit, an imperative; or, carrying the user's own values, a
    habit ("zawsze podawaj numer ...")."""
    sentences = re.split(r"(?<=[.!?])\s+", text.strip())
    said = cues(text)
    return bool(
        Cue.PLEASE in said
        or (own and Cue.INSTRUCTION in said)
        or _ASK.search(text)
        or _ABOUT_ANSWERS.search(text)
        or (_HABIT.search(text) and _ADDRESSED.search(text))
        or any(_IMPERATIVE.match(sentence) for sentence in sentences)
    )


def _names_tool_word(text: str, tools: Collection[str]) -> bool:
    """A word of an offered tool's name: "you reset my password" (reset_login)."""
    said = {word.lower() for word in _WORD.findall(text)}
    return any(tool_words(name) & said for name in tools if name)
