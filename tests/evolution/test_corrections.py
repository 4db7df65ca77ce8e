"""Users' corrections: classified by what they are about and grouped by meaning, whatever
their wording or language, and read from the signals users really send."""

from __future__ import annotations

import string
import uuid
from datetime import timedelta

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from activities.evidence import correction_records
from atdp import utcnow
from evolution.corrections import (
    CorrectionKind,
    UserCorrection,
    category_kind,
    classify,
    correction_groups,
    group_by_meaning,
    join_nearest,
    specifics,
)
from evolution.corrections.words import STOPWORDS
from evolution.window import WindowSpec
from registry import transaction
from tests.evolution.window_helpers import (
    AGENT,
    Recorder,
    feedback,
    implicit_correction,
    score,
    store,
    task_success,
    trajectory,
    world,
)

FACT, INSTRUCTION, TOOL, OTHER = (
    CorrectionKind.MISSING_FACT,
    CorrectionKind.INSTRUCTION,
    CorrectionKind.TOOL_USE,
    CorrectionKind.OTHER,
)

# (what it is about, what a user wrote): several phrasings, several languages.
PHRASINGS = [
    (FACT, "Actually the checked baggage allowance is 30 kg now."),
    (FACT, "No, you can check in 30 kg of luggage."),
    (FACT, "Falsch, das Freigepäck beträgt jetzt 30 kg."),
    (FACT, "Non, la franchise bagage est de 30 kg maintenant."),
    (FACT, "No, para el equipaje son 30 kg."),
    (FACT, "The VPN address is remote-eu.example.net."),
    (FACT, "FYI the gateway moved to gw2.corp.example.org"),
    (FACT, "Please note that the office moved to the second floor."),
    (FACT, "Returns are free for members."),
    (FACT, "Passwords never expire here."),
    (INSTRUCTION, "Please always confirm the travel date back to me."),
    (INSTRUCTION, "Can you repeat the date so I know you got it right?"),
    (INSTRUCTION, "I need you to read the date back to me when you search."),
    (INSTRUCTION, "Keep answers short."),
    (INSTRUCTION, "What should I bring? You never say."),
    (INSTRUCTION, "It would help to know what to take with me to the appointment."),
    (INSTRUCTION, "I'd like the answer to mention the next step."),
    (INSTRUCTION, "Bitte bestätigen Sie mir das Reisedatum."),
    (INSTRUCTION, "Dites-moi ce que je dois apporter, s'il vous plaît."),
    (INSTRUCTION, "Por favor, responde en español."),
    (INSTRUCTION, "Could you stop using so much jargon?"),
    (OTHER, "That didn't work."),
    (OTHER, "Hmm, nothing happened on my side."),
    (OTHER, "Das hat leider nicht funktioniert."),
    (OTHER, "My authenticator is on my old phone."),
]
TOOLS = ["reset_login", "reset_access", "lookup_order", "refund"]


@pytest.mark.parametrize(("kind", "text"), PHRASINGS)
def test_corrections_are_classified_by_their_shape_in_any_language(kind, text) -> None:
    assert classify(text, tools=TOOLS) is kind


@pytest.mark.parametrize(
    "text",
    [
        "You should have used lookup_order, not refund.",
        "Why did you reset my authenticator? I forgot my password.",
        "You reset my password but the problem is my two-factor app.",
    ],
)
def test_naming_an_offered_tool_or_its_action_is_tool_use(text) -> None:
    assert classify(text, tools=TOOLS) is TOOL
    assert classify(text, tools=[]) is not TOOL  # only the agent's own tools count


@pytest.mark.parametrize(
    ("category", "kind"),
    [
        ("wrong_tool", TOOL),
        ("missing_tool_call", TOOL),
        ("incorrect_information", FACT),
        ("outdatedFact", FACT),
        ("did_not_follow_my_request", INSTRUCTION),
        ("policy", INSTRUCTION),
        ("Formatting", INSTRUCTION),
        ("action_failed", None),
        ("other", None),
    ],
)
def test_categories_are_read_word_by_word(category, kind) -> None:
    assert category_kind(category) is kind


def test_a_named_category_is_the_users_own_reading_of_their_words() -> None:
    fact = "Business customers can pay by invoice within 30 days."
    assert classify(fact) is FACT
    assert classify(fact, category="policy") is INSTRUCTION
    assert classify("That didn't work.", category="wrong_information") is FACT
    assert classify("That didn't work.", category="whatever") is OTHER


# A topic is a word that means something (a stopword such as "replies" is no topic).
_WORD = st.text(string.ascii_lowercase, min_size=4, max_size=9).filter(
    lambda word: word not in STOPWORDS
)
_STATEMENTS = [
    "Actually the {topic} is {value} now.",
    "No, the {topic} is {value}.",
    "Falsch, {topic}: {value}.",
    "Non, pour {topic} c'est {value}.",
    "I was told the {topic} is {value}",
]
_REQUESTS = [
    "Please always mention the {topic} in your answers.",
    "Can you tell me the {topic} next time?",
    "Next time say the {topic} back to me.",
    "Bitte nennen Sie immer {topic}.",
    "Pouvez-vous toujours indiquer {topic} ?",
    "Por favor, incluye el {topic}.",
]


@given(
    topic=_WORD,
    value=st.one_of(
        st.integers(1, 99_999).map(str),
        st.builds(lambda a, b: f"{a}.{b}.example.net", _WORD, _WORD),
        st.builds(lambda a, n: f"{a.upper()[:3]}-{n}", _WORD, st.integers(100, 99999)),
    ),
    template=st.sampled_from(_STATEMENTS),
)
def test_a_statement_with_a_value_is_a_fact_whatever_the_topic(topic, value, template) -> None:
    text = template.format(topic=topic, value=value)
    assert classify(text) is FACT
    assert value.lower() in specifics(text)


@given(topic=_WORD, template=st.sampled_from(_REQUESTS))
def test_a_request_is_an_instruction_whatever_the_topic(topic, template) -> None:
    assert classify(template.format(topic=topic)) is INSTRUCTION


def test_a_denied_value_is_not_asserted() -> None:
    assert specifics("No, it is 30 kg, not 23 kg.") == {"30"}


@settings(max_examples=30)
@given(
    topics=st.lists(_WORD, min_size=2, max_size=2, unique=True).filter(
        lambda t: t[0][:4] != t[1][:4]
    ),
    picks=st.lists(st.tuples(st.integers(0, 1), st.sampled_from(_REQUESTS)), min_size=4),
)
def test_requests_about_different_things_never_share_a_group(topics, picks) -> None:
    texts = [(index, template.format(topic=topics[index])) for index, template in picks]
    for members in group_by_meaning(texts, lambda item: item[1]):
        assert len({index for index, _ in members}) == 1


def test_paraphrases_and_translations_of_one_fact_form_one_group() -> None:
    said = [
        "You have to fast for 8 hours before a blood test.",
        "The lab told me no food for 8 hours before blood tests.",
        "Actually it's 8 hours of fasting before any blood draw.",
        "Nein, man muss 8 Stunden nüchtern sein.",
        "Non, il faut être à jeun 8 heures avant une prise de sang.",
        "Our VPN portal is remote-eu.example.net, the old one is gone.",
        "For remote access you connect to remote-eu.example.net.",
    ]
    groups = group_by_meaning(said, lambda text: text)
    assert sorted(len(g) for g in groups) == [2, 5]


@settings(max_examples=30)
@given(
    topics=st.lists(_WORD, min_size=2, max_size=2, unique=True).filter(
        lambda t: t[0][:4] != t[1][:4]
    ),
    picks=st.lists(st.tuples(st.integers(0, 1), st.sampled_from(_REQUESTS)), min_size=4),
    split=st.integers(0, 100),
)
# A frame word ("nennen") rare among the texts once outweighed a topic common among them.
@example(
    topics=["aaaa", "aaab"],
    picks=[(0, _REQUESTS[0])] * 8 + [(0, _REQUESTS[3]), (1, _REQUESTS[0]), (1, _REQUESTS[3])],
    split=10,
)
def test_older_corrections_join_the_groups_all_of_them_would_form(topics, picks, split) -> None:
    """What `correction_groups` does past MAX_GROUPED: the recent ones grouped, each older
    one joining the group it is most like. On two clearly apart topics, that makes the
    groups grouping all of them would."""
    texts = [(index, template.format(topic=topics[index])) for index, template in picks]
    recent = texts[split % len(texts) :]
    older = texts[: split % len(texts)]
    groups, alone = join_nearest(group_by_meaning(recent, lambda i: i[1]), older, lambda i: i[1])
    assert sum(map(len, groups)) + len(alone) == len(texts)  # each item once
    assert all(item in older for item in alone)
    assert all(len({index for index, _ in g}) == 1 for g in groups)  # never across topics
    recent_topics = {index for index, _ in recent}
    assert all(index not in recent_topics for index, _ in alone)  # a topic's group takes it


def test_a_window_counts_its_older_corrections_in_their_groups(monkeypatch) -> None:
    """A window with more corrections of a kind than are grouped at once counts them all."""
    from evolution.corrections import window as corrections_window

    said = [
        "Our office is at 12 Rue de Rivoli, Paris.",
        *(f"The lab needs {h} hours of fasting before a blood test." for h in (8, 8, 8)),
        "Our VPN portal is remote-eu.example.net now.",
        *(f"No, fast {h} hours before the blood test." for h in (8, 8)),
    ]
    base = utcnow()
    members = [
        UserCorrection(text, FACT, "acme", "s-1", uuid.uuid4(), "e", base + at * MINUTE)
        for at, text in enumerate(said)
    ]
    monkeypatch.setattr(corrections_window, "MAX_GROUPED", 3)
    groups = correction_groups(members)
    # the oldest, like no recent one, still forms its own group
    assert sorted(len(g.members) for g in groups) == [1, 1, 5]


# --- reading corrections from a recorded window ---------------------------------------------

MINUTE = timedelta(minutes=1)


def corrections(engine, since):
    with transaction(engine) as session:
        return correction_records(session, WindowSpec(agent=AGENT, since=since)).corrections()


def test_the_next_turn_after_a_rated_down_answer_is_a_correction(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec = Recorder()
    down = trajectory("acme", base)
    answer = rec.llm_call(down, tools=["search_flights"])
    said = rec.user_message(down, "Can you repeat the date so I know you got it right?", answer)
    rec.llm_call(down)
    happy = trajectory("globex", base + MINUTE)
    fine = rec.llm_call(happy)
    rec.user_message(happy, "Great, and now book the return flight please.", fine)
    whole = trajectory("initech", base + 2 * MINUTE)
    first = rec.llm_call(whole)
    rec.user_message(whole, "Nein, man muss 8 Stunden nüchtern sein.", first)
    flagged = trajectory("acme", base + 3 * MINUTE)
    shown = rec.llm_call(flagged)
    rec.user_message(flagged, "No, holiday purchases can be returned until January 31.", shown)
    rewards = [
        *feedback(down, answer, thumbs="down"),  # a thumb on the answer, the words in chat
        score(whole, 0.0),  # a score of the whole session (a streamed answer's feedback)
        implicit_correction(flagged, shown),  # the gateway's next-turn signal
        *feedback(happy, fine, thumbs="up"),
    ]
    store(engine, [down, happy, whole, flagged], rec.events, rewards)

    found = {c.text: c for c in corrections(engine, base - MINUTE)}

    assert set(found) == {
        "Can you repeat the date so I know you got it right?",
        "Nein, man muss 8 Stunden nüchtern sein.",
        "No, holiday purchases can be returned until January 31.",
    }
    asked = found["Can you repeat the date so I know you got it right?"]
    assert (asked.kind, asked.answer, asked.event_id) == (INSTRUCTION, answer.id, said.id)
    assert found["Nein, man muss 8 Stunden nüchtern sein."].kind is FACT


def test_feedback_words_and_failed_outcomes_are_corrections(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec = Recorder()
    boxed = trajectory("acme", base)
    answer = rec.llm_call(boxed)
    failed = trajectory("globex", base + MINUTE)
    first = rec.llm_call(failed, tools=["reset_login", "reset_access"])
    rec.user_message(failed, "You reset my password but I needed my authenticator.", first)
    silent = trajectory("initech", base + 2 * MINUTE)
    quiet = rec.llm_call(silent)
    critiqued = trajectory("acme", base + 3 * MINUTE)
    long = rec.llm_call(critiqued)
    rewards = [
        *feedback(boxed, answer, thumbs="down", correction="It's 30 kg, not 23 kg."),
        *feedback(critiqued, long, thumbs="down", critique="please keep it short"),
        task_success(failed, False),
        *feedback(silent, quiet, thumbs="down", category="wrong_tool"),  # no words at all
    ]
    store(engine, [boxed, failed, silent, critiqued], rec.events, rewards)

    found = corrections(engine, base - MINUTE)

    kinds = {c.text: c.kind for c in found}
    assert kinds == {
        "It's 30 kg, not 23 kg.": FACT,
        "please keep it short": INSTRUCTION,
        "You reset my password but I needed my authenticator.": TOOL,
    }
    groups = correction_groups(found)
    assert {(g.kind, len(g.members)) for g in groups} == {(FACT, 1), (INSTRUCTION, 1), (TOOL, 1)}


def test_a_reported_policy_with_its_terms_supplies_a_fact(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec = Recorder()
    t = trajectory("acme", base)
    answer = rec.llm_call(t)
    policy = "Business customers can pay by invoice within 30 days."
    rewards = feedback(t, answer, thumbs="down", category="policy", correction=policy)
    store(engine, [t], rec.events, rewards)

    (found,) = corrections(engine, base - MINUTE)

    assert found.kind is INSTRUCTION and found.category == "policy"
    assert found.supplies_fact  # its terms are a fact a good answer states


def test_a_correction_spread_over_two_turns_is_read_whole(engine) -> None:
    world(engine)
    base = utcnow() - 30 * MINUTE
    rec = Recorder()
    t = trajectory("acme", base)
    wrong = rec.llm_call(t)
    nope = rec.user_message(t, "Nope.", wrong)
    again = rec.llm_call(t)
    rec.user_message(t, "Le bagage en soute est limité à 30 kg.", again)
    moved_on = trajectory("globex", base + MINUTE)
    first = rec.llm_call(moved_on)
    rec.user_message(moved_on, "No, it is 23 kg.", first)
    second = rec.llm_call(moved_on)
    rec.user_message(moved_on, "Thanks! And can I bring skis?", second)
    rewards = [implicit_correction(t, wrong), implicit_correction(moved_on, first)]
    store(engine, [t, moved_on], rec.events, rewards)

    found = {c.trajectory_id: c for c in corrections(engine, base - MINUTE)}

    joined = found[t.id]
    assert joined.text == "Nope. Le bagage en soute est limité à 30 kg."
    assert (joined.kind, joined.event_id, joined.answer) == (FACT, nope.id, wrong.id)
    assert found[moved_on.id].text == "No, it is 23 kg."  # said in one turn; then moved on
