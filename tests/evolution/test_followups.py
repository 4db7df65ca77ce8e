"""Follow-ups read without any score: the multilingual lexicon, values, structural signals,
and corrections that differ only in their values."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from evolution.corrections import CorrectionKind, UserCorrection, correction_groups
from evolution.corrections.window import _with_own_values
from evolution.followups import (
    Signal,
    Turn,
    asked_for,
    judged_follow_ups,
    read_conversation,
    values,
)
from runtime.lexicon import _PHRASES, LANGUAGES, Cue, cues

# What users write after a wrong answer, per language: (denial, ask again or confirm).
DISSATISFIED = {
    "en": ("That's not right.", "Can you confirm the time again?"),
    "de": ("Das stimmt nicht.", "Können Sie das bitte nochmal bestätigen?"),
    "fr": ("Ce n'est pas ça, c'est faux.", "Pouvez-vous répéter l'heure ?"),
    "es": ("Eso no es correcto.", "¿Me puede confirmar la fecha otra vez?"),
    "it": ("Non è corretto.", "Può ripetere la data, per favore?"),
    "pt": ("Não está certo.", "Pode confirmar o horário de novo?"),
    "nl": ("Dat klopt niet.", "Kunt u de datum nog een keer bevestigen?"),
    "pl": ("To nieprawda.", "Proszę jeszcze raz potwierdzić godzinę."),
    "sv": ("Det stämmer inte.", "Kan du upprepa datumet?"),
    "da": ("Det passer ikke.", "Kan du gentage datoen?"),
    "no": ("Det stemmer ikke.", "Kan du gjenta datoen?"),
    "fi": ("Tuo ei pidä paikkaansa.", "Voisitko toistaa päivämäärän?"),
    "cs": ("To není pravda.", "Můžete to zopakovat?"),
    "tr": ("Bu yanlış.", "Tarihi tekrar söyler misiniz?"),
    "ru": ("Это неправильно.", "Повторите, пожалуйста, дату ещё раз."),
    "uk": ("Це неправильно.", "Повторіть, будь ласка, ще раз."),
    "el": ("Αυτό είναι λάθος.", "Μπορείτε να επαναλάβετε την ημερομηνία;"),
    "ar": ("هذا غير صحيح.", "هل يمكنك تأكيد الموعد مرة أخرى؟"),
    "he": ("זה לא נכון.", "אפשר לאשר שוב את התאריך?"),
    "hi": ("यह गलत है।", "क्या आप तारीख फिर से बता सकते हैं?"),
    "ja": ("それは違います。", "予約の日時をもう一度確認してもらえますか？"),
    "zh": ("不对，你搞错了。", "请再说一遍日期。"),
    "ko": ("틀렸어요.", "날짜를 다시 확인해 주세요."),
    "id": ("Itu salah.", "Tolong ulangi tanggalnya."),
    "vi": ("Không đúng.", "Bạn có thể nhắc lại ngày không?"),
    "th": ("ผิดครับ", "ช่วยยืนยันวันที่อีกครั้งได้ไหม"),
}
SATISFIED = {
    "en": "Thanks, that's great!",
    "de": "Danke, perfekt.",
    "fr": "Merci, parfait.",
    "es": "¡Gracias, perfecto!",
    "ja": "ありがとうございます。",
    "zh": "谢谢！",
    "ru": "Спасибо!",
    "ar": "شكرا",
    "hi": "धन्यवाद",
    "ko": "감사합니다",
}
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def conversation(*said: tuple[str, str]) -> list[Turn]:
    """Turns of one trajectory, each following the one before; (speaker, text)."""
    trajectory, turns, previous = uuid.uuid4(), [], None
    for seq, (speaker, text) in enumerate(said):
        turn = Turn(uuid.uuid4(), trajectory, seq, speaker, text, previous)
        turns.append(turn)
        previous = turn.event_id
    return turns


def test_the_lexicon_covers_twenty_languages_and_several_scripts() -> None:
    assert len(LANGUAGES) >= 20
    assert set(DISSATISFIED) == set(LANGUAGES)
    # Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Han, Kana, Hangul, Thai
    scripts = "aдλلלग不い틀ผ"
    written = "".join(p for table in _PHRASES.values() for p in table.values())
    assert all(letter in written for letter in scripts)


@given(
    language=st.sampled_from(sorted(DISSATISFIED)),
    which=st.integers(0, 1),
    before=st.sampled_from(["", "Hmm. ", "Well... ", "Ok — ", "   "]),
    after=st.sampled_from(["", " 🙁", "!!", " ...", " 19:30"]),
)
def test_a_denial_or_a_request_again_reads_as_dissatisfaction_in_every_language(
    language: str, which: int, before: str, after: str
) -> None:
    text = before + DISSATISFIED[language][which] + after
    (read,) = read_conversation(conversation(("user", "Book a table."), ("agent", "Done."),
                                             ("user", text)))  # fmt: skip
    assert read.dissatisfied, (language, text, read.signals)


@given(language=st.sampled_from(sorted(SATISFIED)), shout=st.booleans())
def test_thanks_is_no_dissatisfaction(language: str, shout: bool) -> None:
    text = SATISFIED[language].upper() if shout else SATISFIED[language]
    (read,) = read_conversation(conversation(("user", "Book a table."), ("agent", "Done."),
                                             ("user", text)))  # fmt: skip
    assert not read.dissatisfied and read.satisfied


@given(
    said=st.integers(1, 99),
    other=st.integers(1, 99),
    unit=st.sampled_from(["kg", "hours", "Stunden", "dni", "日", "km", "€"]),
    words=st.sampled_from(["", "Hmm, ", "Je crois ", "Думаю, ", "Eigentlich "]),
)
def test_a_value_that_contradicts_the_answer_needs_no_words(
    said: int, other: int, unit: str, words: str
) -> None:
    answer = f"It is {said} {unit}."
    turns = conversation(
        ("user", "How much?"), ("agent", answer), ("user", f"{words}{other} {unit}")
    )
    (read,) = read_conversation(turns)
    assert (Signal.CONTRADICTION in read.signals) == (said != other)


def test_a_value_the_answer_left_out_and_the_reply_gave_back() -> None:
    turns = conversation(
        ("user", "3月14日の19:00に4名で予約をお願いします。"),
        ("agent", "ご予約を承りました。"),
        ("user", "何日の何時で予約されましたか？"),
        ("agent", "ご予約内容：3月14日 19:00、4名様です。"),
    )
    (read,) = read_conversation(turns)
    assert read.dissatisfied and read.asks
    assert read.elicited == ("date", "time", "number")
    assert asked_for("ご予約を承りました。", "ご予約内容：3月14日 19:00、4名様です。") == [
        "3月14日 19:00 4"
    ]


def test_a_re_ask_and_a_retraction_read_as_dissatisfaction() -> None:
    reask = conversation(
        ("user", "Find me a flight from Oslo to Vienna on Friday."),
        ("agent", "Here are some hotels in Vienna."),
        ("user", "I need a flight from Oslo to Vienna on Friday"),
    )
    assert Signal.REASK in read_conversation(reask)[0].signals
    retracted = conversation(
        ("user", "When do you close?"),
        ("agent", "We close at 20:00."),
        ("user", "Hmm?"),
        ("agent", "Sie haben recht, wir schließen um 22:00."),
    )
    assert Signal.RETRACTION in read_conversation(retracted)[0].signals


def test_moving_on_is_no_dissatisfaction() -> None:
    for text in ("ok, next", "Great, go on.", "Weiter bitte.", "And how much is parking?"):
        turns = conversation(("user", "Onboard Ana."), ("agent", "Laptop ordered."), ("user", text))
        assert not read_conversation(turns)[0].dissatisfied, text


def test_values_by_shape_in_any_script() -> None:
    kinds = {v.kind for v in values("予約番号R-1234、3月14日 19:30、€40、PL123456 a@b.org 30 kg")}
    assert kinds == {"code", "date", "time", "amount", "email", "number"}
    assert Cue.DENIAL in cues("NÃO ESTÁ CERTO") and Cue.DENIAL in cues("nao esta certo")


# --- corrections that differ only in their values ------------------------------------------

TEMPLATES = {
    "Please always quote my reference number {v} in your answers.": CorrectionKind.INSTRUCTION,
    "Proszę zawsze podawać numer mojej przesyłki {v}.": CorrectionKind.INSTRUCTION,
    "Next time mention order {v} at the top.": CorrectionKind.INSTRUCTION,
    "Bitte nennen Sie immer meine Kundennummer {v}.": CorrectionKind.INSTRUCTION,
    "The invoice total is {v} for my order.": CorrectionKind.MISSING_FACT,
    "Mi número de cliente es {v}.": CorrectionKind.MISSING_FACT,
}
VALUE = st.one_of(
    st.from_regex(r"[A-Z]{2}-[0-9]{4,6}", fullmatch=True),
    st.from_regex(r"[0-9]{6,9}", fullmatch=True),
    st.from_regex(r"[A-Z][0-9]{5}", fullmatch=True),
)


def correction(text: str, session: int) -> UserCorrection:
    return UserCorrection(
        text=text, kind=CorrectionKind.OTHER, tenant="acme", session=f"s{session}",
        trajectory_id=uuid.uuid4(), source=str(uuid.uuid4()),
        at=NOW + timedelta(seconds=session),
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    template=st.sampled_from(sorted(TEMPLATES)),
    found=st.lists(VALUE, min_size=8, max_size=20, unique=True),
)
def test_corrections_that_differ_only_in_their_values_are_one_cluster_of_their_kind(
    template: str, found: list[str]
) -> None:
    read = [correction(template.format(v=value), i) for i, value in enumerate(found)]
    classified = _with_own_values(read, {}, [])
    groups = correction_groups(classified)
    assert len(groups) == 1, [(g.kind, g.key, len(g.members)) for g in groups]
    assert groups[0].kind is TEMPLATES[template]
    assert len(groups[0].members) == len(found)


def test_a_value_many_sessions_state_stays_a_fact() -> None:
    read = [correction("No, the allowance is 30 kg now.", i) for i in range(10)]
    (group,) = correction_groups(_with_own_values(read, {}, []))
    assert group.kind is CorrectionKind.MISSING_FACT
    assert all(c.supplies_fact and not c.own for c in group.members)


# --- a judge model, trusted as far as it agrees with ratings --------------------------------


def test_a_judge_is_used_only_when_it_agrees_with_users_ratings() -> None:
    turns = []
    for i in range(12):
        turns += conversation(("user", f"Question {i}"), ("agent", "Answer."), ("user", "Hmm ok"))
    read = read_conversation(turns)
    ratings = {f.answer_id: 0.0 for f in read}  # users rated every answer down

    agreeing, report = judged_follow_ups(read, lambda pairs: [True] * len(pairs), ratings)
    assert report.used and report.agreement == 1.0
    assert all(f.dissatisfied for f in agreeing)

    contrary, report = judged_follow_ups(read, lambda pairs: [False] * len(pairs), ratings)
    assert not report.used and "refused" in report.reason
    assert [f.dissatisfied for f in contrary] == [f.dissatisfied for f in read]

    few, report = judged_follow_ups(read[:3], lambda pairs: [True] * len(pairs), ratings)
    assert not report.used and "only 3" in report.reason
