"""`evoplane review list | show | label | skip`, `evoplane score`, `evoplane scorers` and
`evoplane evalset list | show`: people and their own judges, through the control API."""

from __future__ import annotations

import json
from typing import Any

import typer

from evoplane.cli.control_cmd import _control, _duration_minutes, console

app = typer.Typer(
    help="What needs a person: list it, read an item, label or skip it.", no_args_is_help=True
)
evalset_app = typer.Typer(
    help="An agent's evaluation sets, version by version.", no_args_is_help=True
)


@app.command("list")
def list_items(
    agent: str | None = typer.Option(None, help="Only this agent's items."),
    reviewer: str | None = typer.Option(None, help="Only the items given to this reviewer."),
    kind: str | None = typer.Option(None, help="correction | approval | finding | canary"),
    status: str = typer.Option("open", help="open | labelled | closed | all"),
    limit: int = typer.Option(50, help="At most this many items."),
) -> None:
    """The queue, oldest first, then each reviewer's progress."""
    with _control() as control:
        found = control.review(
            agent, status=None if status == "all" else status, kind=kind, reviewer=reviewer,
            limit=limit,
        )  # fmt: skip
    for item in found["items"]:
        seen = f" x{item['occurrences']}" if item["occurrences"] > 1 else ""
        console.print(
            f"#{item['id']}  {item['kind']}  {item['agent']}  {item['status']}  "
            f"{item['assignee'] or '-'}{seen}  {item['title']}",
            highlight=False,
            markup=False,
        )
    if not found["items"]:
        console.print("nothing to review")
    console.print(_progress_line(found["progress"]), highlight=False)
    if found.get("mirror_error"):
        console.print(f"MLflow did not take the queue: {found['mirror_error']}", highlight=False)


def _progress_line(progress: dict[str, Any]) -> str:
    people = "; ".join(
        f"{name}: {counts['open']} open, {counts['labelled']} labelled, {counts['skipped']} skipped"
        for name, counts in progress["reviewers"].items()
    )
    totals = (
        f"{progress['open']} open, {progress['labelled']} labelled, {progress['closed']} closed"
    )
    return f"{totals}" + (f"; {people}" if people else "")


@app.command("show")
def show(item_id: int = typer.Argument(..., help="The item's number (`review list`).")) -> None:
    """One item: what to judge, the labels it takes, and its labels so far."""
    with _control() as control:
        item = control.review_item(item_id)
    print_ = lambda text: console.print(text, highlight=False, markup=False)  # noqa: E731
    print_(f"#{item['id']} {item['kind']} of {item['agent']} ({item['status']}): {item['title']}")
    print_(f"given to: {item['assignee'] or 'nobody'}; seen {item['occurrences']} time(s)")
    for line in _body_lines(item["body"]):
        print_(line)
    print_("labels:")
    for label, meaning in (item["body"].get("choices") or {}).items():
        print_(f"  {label}: {meaning}")
    for given in item["labels"]:
        said = given["label"] if given["action"] == "label" else "skipped"
        note = f" ({given['note']})" if given["note"] else ""
        print_(f"  by {given['reviewer']} via {given['via']}: {said}{note}")


def _body_lines(body: dict[str, Any]) -> list[str]:
    """What to judge, as a person reads it, whatever the item's kind."""
    lines = []
    if body.get("answer_text"):
        lines.append(f"the agent answered: {body['answer_text']}")
    if body.get("text"):
        lines.append(f"the user wrote: {body['text']} (read as: {body.get('reading')})")
    if body.get("case"):
        lines.append(f"safety case {body['case']} fails {', '.join(body.get('checks') or [])}")
        lines.append(f"  candidate: {body.get('reason')}; parent: {body.get('parent_reason')}")
    if body.get("reason"):
        lines.append(f"reason: {body['reason']}")
    for gate in body.get("gates") or []:
        lines.append(f"  {gate['gate']}: {gate['verdict']} ({gate['reason']})")
    plan = body.get("plan") or {}
    if plan.get("words"):
        lines.append(f"open question: {plan['words']}")
    elif plan.get("sessions_needed"):
        lines.append(f"needs ~{plan['sessions_needed']} sessions a side; has {plan['sessions']}")
    diff = body.get("diff")
    if diff:
        lines.append(f"{diff['from']} -> {diff['to']}: {', '.join(diff['changed']) or 'no change'}")
        lines += [f"  {json.dumps(diff['parts'][part])[:400]}" for part in diff["changed"]]
    return lines


@app.command("label")
def label(
    item_id: int = typer.Argument(..., help="The item's number."),
    given: str = typer.Argument(..., metavar="LABEL", help="One of the item's labels (`show`)."),
    reviewer: str = typer.Option(..., help="Who labels (recorded, and counted in progress)."),
    score: float | None = typer.Option(
        None, help="A corrected answer's score, 0 (wrong) to 1 (right)."
    ),
    note: str = typer.Option(
        "", help="Why; for a correction, what the user meant in words the agent can use."
    ),
) -> None:
    """Label an item; says what the label became (rewards, cases, the evolution's answer)."""
    with _control() as control:
        done = control.label(item_id, reviewer, given, score=score, note=note)
    effects = done["label"]["effects"]
    became = []
    if effects.get("rewards"):
        became.append(f"{len(effects['rewards'])} human_review reward(s)")
    if effects.get("cases"):
        became.append(f"case(s) {', '.join(effects['cases'])} in {effects['evaluation_set']}")
    if effects.get("update"):
        became.append(f"the evolution's answer: {effects['update']}")
    console.print(
        f"#{item_id} labelled {given}: {'; '.join(became) or 'recorded'}", highlight=False
    )


@app.command("skip")
def skip(
    item_id: int = typer.Argument(..., help="The item's number."),
    reviewer: str = typer.Option(..., help="Who passes on it."),
    reason: str = typer.Option("", help="Why (recorded)."),
) -> None:
    """Pass on an item: it goes to another reviewer."""
    with _control() as control:
        item = control.skip(item_id, reviewer, reason)
    console.print(f"#{item_id} now given to {item['assignee'] or 'nobody'}", highlight=False)


def score(
    agent: str = typer.Option(..., help="The agent whose traffic to score."),
    window: str = typer.Option("1d", help="Traffic window, e.g. 30m, 6h, 1d."),
    every: str | None = typer.Option(None, help="Score every so often instead, e.g. 5m."),
    scorer: list[str] = typer.Option([], help="Only these scorers (repeatable)."),
    tenant: list[str] = typer.Option([], help="Only these tenants (repeatable)."),
) -> None:
    """Run the agent's code scorers on its recent traffic now, or schedule them."""
    with _control() as control:
        done = control.score(
            agent,
            window_minutes=_duration_minutes(window),
            every_minutes=_duration_minutes(every) if every else None,
            scorers=scorer or None,
            tenants=tenant or None,
        )
    if every:
        console.print(f"schedule {done['id']} {'created' if done['created'] else 'updated'}")
        return
    for name, run in done["scorers"].items():
        if run["error"]:
            console.print(f"{name}: {run['error']}", highlight=False, markup=False)
            continue
        console.print(
            f"{name}: {run['scored']} scored, {run['abstained']} abstained, "
            f"{run['failed']} failed, {run['left']} left for later",
            highlight=False,
        )
        for error in run["errors"]:
            console.print(f"  {error}", highlight=False, markup=False)
    if not done["scorers"]:
        console.print(f"{agent} has no code scorers (`scorers` in its settings)")


def scorers(agent: str = typer.Option(..., help="The agent.")) -> None:
    """How each code scorer of the agent has fared, and its latest error."""
    with _control() as control:
        found = control.scorers(agent)
    for summary in found:
        line = (
            f"{summary['scorer']}: {summary['scored']} scored, {summary['abstained']} "
            f"abstained, {summary['failed']} failed"
        )
        if summary["last_error"]:
            line += f"; last error: {summary['last_error']}"
        console.print(line, highlight=False, markup=False)
    if not found:
        console.print(f"no scorer of {agent} has run yet")


@evalset_app.command("list")
def list_sets(agent: str = typer.Option(..., help="The agent.")) -> None:
    """Every version of the agent's evaluation sets, newest first."""
    with _control() as control:
        found = control.evaluation_sets(agent)
    for version in found:
        console.print(
            f"{version['id']}  {version['cases']} cases ({version['fixed']} fixed)  "
            f"by {version['author']}: {version['reason']}",
            highlight=False,
            markup=False,
        )
    if not found:
        console.print(f"{agent} has no evaluation set yet: label review items to start one")


@evalset_app.command("show")
def show_set(
    agent: str = typer.Argument(..., help="The agent."),
    name: str = typer.Option("default", help="The set's name."),
    version: int | None = typer.Option(None, help="A version number (default: the latest)."),
) -> None:
    """One version of a set: each case, its status, facts and feedback."""
    with _control() as control:
        found = control.evaluation_set(agent, name, version)
    console.print(f"{found['id']} ({found['reason']})", highlight=False, markup=False)
    for case in found["cases"]:
        facts = "; ".join(case["required_facts"])
        said = " | ".join(case["feedback"])
        line = f"  {case['key']}  {case['status']}"
        line += f"  facts: {facts}" if facts else ""
        line += f"  users said: {said}" if said else ""
        console.print(line, highlight=False, markup=False)
