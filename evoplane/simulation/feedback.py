"""What a feedback widget sends about one answer: a rating, a category, a correction."""

from __future__ import annotations

from typing import Any, Literal

__all__ = ["Rating", "widget_report"]

# How users rate an answer: a score in [0, 1], a thumb, or not at all.
Rating = Literal["score", "thumbs", "none"]


def widget_report(
    rating: Rating,
    *,
    good: bool,
    category: str | None = None,
    correction: str | None = None,
) -> dict[str, Any]:
    """The `/v1/feedback` fields a user's report sets; empty when they said nothing.

    Args:
        category: the widget's category of what was wrong (scored 0).
        correction: what the answer should have said, in the user's words.
    """
    report: dict[str, Any] = {}
    if rating == "score":
        report["score"] = 1.0 if good else 0.0
    elif rating == "thumbs":
        report["thumbs"] = "up" if good else "down"
    if category:
        report.update(category=category, category_score=0.0)
    if correction:
        report["correction"] = correction
    return report
