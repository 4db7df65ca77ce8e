"""BM25 memory retrieval: relevant items first, bounded, deterministic."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from atdp import new_id, utcnow
from registry import MemoryItem, MemoryKind
from runtime.version.bm25 import tokenize
from runtime.version.memory import MemoryIndex


def item(content: str) -> MemoryItem:
    now = utcnow()
    return MemoryItem(
        id=new_id(),
        agent="bot",
        tenant="acme",
        kind=MemoryKind.FACT,
        key=content,
        content=content,
        created_at=now,
        updated_at=now,
    )


FACTS = [
    item("Refunds for damaged goods are processed within 5 business days."),
    item("The Berlin warehouse closes at 18:00 on Fridays."),
    item("Premium customers can escalate to the priority support line."),
    item("Orders ship from the Berlin warehouse unless marked express."),
]


def test_the_relevant_fact_ranks_first() -> None:
    index = MemoryIndex(FACTS)
    top = index.search("When does the Berlin warehouse close on Friday?", k=2)
    assert top[0].item is FACTS[1]
    assert [hit.item for hit in index.search("how long do refunds take", k=3)] == [FACTS[0]]


def test_no_overlap_no_results() -> None:
    assert MemoryIndex(FACTS).search("quantum chromodynamics", k=3) == []
    assert MemoryIndex([]).search("refunds", k=3) == []


def test_rare_terms_outweigh_common_ones() -> None:
    index = MemoryIndex(FACTS)
    # "berlin" appears in two facts, "escalate" in one: the rarer word decides.
    assert index.search("berlin escalate", k=1)[0].item is FACTS[2]


words = st.sampled_from(
    "refund berlin warehouse premium escalate express orders friday ship".split()
)
documents = st.lists(st.lists(words, min_size=1, max_size=8).map(" ".join), min_size=1, max_size=12)


@given(documents, st.lists(words, min_size=1, max_size=4).map(" ".join), st.integers(0, 15))
def test_search_is_bounded_positive_and_sorted(docs, query, k) -> None:
    hits = MemoryIndex([item(d) for d in docs]).search(query, k)
    assert len(hits) <= k
    assert all(hit.score > 0 for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    assert all(set(tokenize(query)) & set(tokenize(hit.item.content)) for hit in hits)


@given(documents, words)
def test_an_item_matching_nothing_else_is_found(docs, word) -> None:
    unique = item("zyxwvut")
    hits = MemoryIndex([*[item(d) for d in docs], unique]).search(f"{word} zyxwvut", k=1)
    # The only document with the unique term contains the rarest term: it must come first
    # unless another document matches the other word strongly; either way it is retrievable.
    found = MemoryIndex([*[item(d) for d in docs], unique]).search("zyxwvut", k=1)
    assert found[0].item is unique and hits


def test_a_question_sharing_no_word_finds_its_item_by_subwords() -> None:
    compound = item("Falsch, das Freigepäck beträgt jetzt 30 kg.")
    index = MemoryIndex([*FACTS, compound])
    # "Gepäck" is only inside "Freigepäck", "refund" only inside "refunds".
    assert [h.item for h in index.search("Wie viel Gepäck darf ich mitnehmen?", k=3)] == [compound]
    assert index.search("Can I get a refund?", k=1)[0].item is FACTS[0]


def test_subwords_stay_out_when_a_word_matches() -> None:
    refunding = item("Refunding takes a while.")
    express = item("Express orders ship first.")
    index = MemoryIndex([refunding, express])
    # "express" matches a word of one item; "refunds" only subwords of the other.
    assert [h.item for h in index.search("express refunds", k=3)] == [express]
    assert [h.item for h in index.search("refunds", k=3)] == [refunding]
