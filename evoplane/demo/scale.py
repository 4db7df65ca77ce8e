"""How big the demo plays: traffic per round and how strict its thresholds, full or for CI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FULL", "SMALL", "DemoScale"]


# The harness operator may change the instructions only: an earlier measurement on the demo
# model had the invoice lesson answer invoice questions 62% of the time, and 25% when the
# operator's two few-shot demos were added too (the warm start rarely saw demos). Sampled as
# the bot samples (temperature 1), the lesson lifts them from about 7% to 40%.
_HARNESS = {"max_bootstrapped_demos": 0, "max_labeled_demos": 0}


@dataclass(frozen=True)
class DemoScale:
    """How much traffic and how strict the thresholds: the full demo or the CI one.

    `policy`, `gate`, `training` and `harness` become the agent's evolution settings (set
    through the control API); the full demo keeps the policy's defaults.
    """

    tickets: int
    concurrency: int = 3
    policy: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    training: dict[str, Any] = field(default_factory=dict)
    harness: dict[str, Any] = field(default_factory=lambda: dict(_HARNESS))
    # The replay gate is skipped, as an operator may: its generic safety suite asks for
    # refusals a 0.56M-parameter model cannot write, and replaying each window on both
    # versions would cost about a minute a round on 2 cores. The live gates judge instead.
    skip_gates: tuple[str, ...] = ("replay",)
    evolution_timeout: float = 900.0


# The weights round's training, sized to the demo's 10 minutes on 2 cores: a step samples 8
# completions of each of 6 prompts and updates on the groups with mixed rewards (about 5 s
# a step). Most of the window's requests are ones the model gets right every time, whose
# groups teach nothing, so a step may draw up to 6 more prompts to fill its batch.
# Completions may run to 96 tokens: a byte-level tool call such as
# `<tool_call>{"name": "lookup_order", ...}</tool_call>` is 85 tokens, and a call cut short
# scores as a wrong one.
_TRAINING = {
    "steps": 30,
    "prompts_per_step": 6,
    "fill_draws": 6,
    "group_size": 8,
    "max_new_tokens": 96,
    "learning_rate": 5e-4,
    # Without a KL penalty the window's tool calls crowd out what the model already did
    # well: retrained offline on one run's window, the answers to the base facts' questions
    # fell from 0.73 to 0.38 ("Gift cards are valid for threeye ars."); with kl_coef 0.1 they
    # held at 0.71, for a right-tool rate of 0.64 instead of 0.72 (base 0.31).
    "kl_coef": 0.1,
    "checkpoint_every": 10,
    "holdout": 0.1,
    # Every core (threads unset): no traffic runs while the candidate is built, and a step
    # took 4.2 s with two threads against 5.7 s with one on a slow 2-core host.
}

FULL = DemoScale(
    # The policy acts on 30 trajectories or more, and the window leaves out the tenth of
    # sessions a holdback keeps on the previous version: 34 tickets left 29 in one run (5
    # held back, which 34 tickets do about one round in four); with 40, fewer than 30 stay
    # about one round in 700.
    tickets=40,
    gate={
        "min_samples": 10,
        "min_tenant_samples": 5,
        # A dozen sessions a tenant a side: a tenant's interval spans about +-0.8, so no
        # drop of one tenant can be ruled out and every pass would wait on it; tenants
        # stop a candidate on confident harm only (GateConfig.tenant_tolerance).
        "tenant_tolerance": None,
        "step_weights": [0.5],
        "step_seconds": 10.0,
        "shadow_seconds": 8.0,
        "max_extensions": 3,
        # The budget is a look and three more (canary_seconds None); no person answers
        # here, so a canary still open then goes on looking, up to 4 minutes, as an
        # unanswered "ask" would. On a loaded host a canary sees fewer sessions in the
        # same seconds: a tool-schema fix read +0.17 over 25 sessions a side at the end of
        # a 40 s budget and was rolled back (load average 14), and the rounds after it
        # then failed with it. A change with a real gain is answered at the first looks
        # on an idle host, so the demo takes no longer there.
        "canary_seconds": None,
        "when_inconclusive": "extend",
        "max_canary_seconds": 240.0,
    },
    training=_TRAINING,
)
SMALL = DemoScale(
    # The tool-schema round needs 3 trajectories with the refused argument: 20 tickets (18
    # after the holdback) once gave fewer in CI, a few-percent draw; 24 make it about 1%.
    tickets=24,
    policy={
        "min_trajectories": 14,
        "min_cluster_trajectories": 3,
        "regression_min_samples": 10,
        "canary_min_samples": 10,
    },
    gate={
        "min_samples": 6,
        "min_tenant_samples": 4,
        "tenant_tolerance": None,  # as the full demo's (above)
        "step_weights": [0.5],
        "step_seconds": 6.0,
        "shadow_seconds": 5.0,
        "max_extensions": 3,
        # As the full demo's (above): CI runs it beside other tests on two cores.
        "canary_seconds": None,
        "when_inconclusive": "extend",
        "max_canary_seconds": 180.0,
    },
    training={**_TRAINING, "steps": 20},
)
