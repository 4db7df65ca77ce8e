"""A window's sample: the SQL predicate keeps exactly the trajectories `in_sample` keeps, on
both backends, and about the share it names."""

from __future__ import annotations

from datetime import timedelta

from atdp import utcnow
from registry import (
    SAMPLE_SPACE,
    TrajectoryWindow,
    in_sample,
    record_trajectory,
    transaction,
    window_trajectories,
)
from tests.registry.helpers import seed_world, trajectory

TRAJECTORIES = 400


def test_the_sample_is_the_same_in_sql_and_in_python(engine) -> None:
    seed_world(engine)
    start = utcnow() - timedelta(hours=1)
    recorded = [
        trajectory("acme" if n % 2 else "globex", at=start + timedelta(seconds=n))
        for n in range(TRAJECTORIES)
    ]
    with transaction(engine) as session:
        for t in recorded:
            record_trajectory(session, t)
    everything = {t.id for t in recorded}
    for sample in (0, 1, SAMPLE_SPACE // 7, SAMPLE_SPACE // 2, SAMPLE_SPACE - 1, SAMPLE_SPACE):
        window = TrajectoryWindow(agent="support-bot", since=start, sample=sample)
        with transaction(engine) as session:
            kept = {t.id for t in window_trajectories(session, window)}
        assert kept == {i for i in everything if in_sample(i, sample)}, sample
    half = {i for i in everything if in_sample(i, SAMPLE_SPACE // 2)}
    # Uniform: a half sample of 400 random tails keeps 200 +- 5 standard deviations.
    assert abs(len(half) - TRAJECTORIES / 2) < 5 * (TRAJECTORIES / 4) ** 0.5
    assert in_sample(recorded[0].id, None) and not in_sample(recorded[0].id, 0)
