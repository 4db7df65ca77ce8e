"""Screenshots for the README: the control API's /docs offline, and MLflow's experiment view.

    python docs/screenshots.py [--out docs/images] [--keep-up]

Starts, on loopback only, an MLflow server (as `evoplane up` does, SQLite under a temporary
directory) and the control API (SQLite registry; no Temporal: /docs never reaches it). Seeds
MLflow with four evolutions of `support-bot` through `EvolutionTracker`, as the activities
record them: a harness fix promoted through replay and a stepped canary, a memory change
rolled back at the canary, a hot-fix shipped with every gate skipped, and a noop. Then
headless Chromium (Debian's `chromium` package) takes each page; every host but 127.0.0.1
is unresolvable to it, so /docs is shown as it renders without network.

Writes `control-docs.png`, `mlflow-experiment.png` (the runs link Evoplane gives, the view
the experiment opens on) and `mlflow-run.png` (the promoted run) under --out.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import uvicorn

from activities.tracking import EvolutionTracker
from activities.tracking.names import run_link, runs_link
from atdp.version import Harness, MemorySnapshot, ModelRef, VersionSpec
from evolution.gates import (
    GateConfig,
    GateResult,
    MetricSamples,
    Question,
    ReplayCase,
    Sample,
    judge,
    judge_replay,
)
from evoplane.control.app import create_control_app
from evoplane.control.config import ControlConfig
from evoplane.settings import Settings
from evoplane.stack.process import wait_until
from evoplane.stack.services import mlflow_service
from registry import create_db_engine, upgrade

AGENT = "support-bot"
TENANTS = ("acme", "globex", "initech")
GATE = GateConfig(min_samples=20, step_weights=[0.1, 0.5])
WINDOW = 1800, 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "images")
    parser.add_argument("--keep-up", action="store_true", help="wait for Ctrl-C at the end")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        raise SystemExit("no chromium found: apt-get install -y chromium (Debian's package)")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="evoplane-shots-") as scratch:
        data = Path(scratch)
        mlflow = _start_mlflow(data)
        try:
            control_url = _start_control_api(data)
            experiment_id, promoted_run = _seed(EvolutionTracker(mlflow.urls["MLflow UI"]))
            ui = mlflow.urls["MLflow UI"]
            shots = {
                "control-docs.png": (f"{control_url}/docs", 10_000),
                "mlflow-experiment.png": (runs_link(ui, experiment_id), 30_000),
                "mlflow-run.png": (run_link(ui, experiment_id, promoted_run), 30_000),
            }
            for name, (url, budget) in shots.items():
                _screenshot(browser, url, args.out / name, budget, data / "chromium")
                print(f"{args.out / name}  <- {url}")
            if args.keep_up:
                print(f"up: {ui} and {control_url}; Ctrl-C stops")
                try:
                    threading.Event().wait()
                except KeyboardInterrupt:
                    pass
        finally:
            mlflow.process.stop(grace=5.0)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _start_mlflow(data: Path):
    port = _free_port()
    settings = Settings(
        data_dir=data,
        host="127.0.0.1",
        mlflow_port=port,
        mlflow_uri=f"http://127.0.0.1:{port}",
        mlflow_backend_uri=f"sqlite:///{data / 'mlflow.db'}",
    )
    service = mlflow_service(settings)
    service.process.start()
    wait_until(lambda: service.healthy() or service.process.exited() is not None, 120, 0.5)
    if not service.healthy():
        raise SystemExit(f"MLflow did not start; see {service.process.log_path}")
    return service


def _start_control_api(data: Path) -> str:
    """The control API in a thread, without its lifespan (it would connect to Temporal)."""
    engine = create_db_engine(f"sqlite:///{data / 'registry.db'}")
    upgrade(engine)
    app = create_control_app(ControlConfig(engine=engine, admin_token="evpadm_screenshots"))
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(f"{url}/openapi.json").status_code == 200:
                return url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit("the control API did not start")


def _screenshot(browser: str, url: str, path: Path, budget_ms: int, profile: Path) -> None:
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",  # root in a container
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",  # a fresh profile: the page as a first visit shows it
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",  # no network
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--virtual-time-budget={budget_ms}",
            f"--screenshot={path}",
            url,
        ],
        check=True,
        capture_output=True,
        timeout=180,
    )


# --- the seeded evolutions --------------------------------------------------------------


def _spec(instructions: str, memory: list[str]) -> dict:
    spec = VersionSpec(
        model=ModelRef(engine="openai", model="tiny-support"),
        harness=Harness(instructions=instructions),
        memory=MemorySnapshot(item_ids=memory),
    )
    return spec.model_dump(mode="json")


def _samples(rng: np.random.Generator, mean: float, n: int) -> list[Sample]:
    return [
        Sample(tenant=TENANTS[i % 3], value=float(v)) for i, v in enumerate(rng.random(n) < mean)
    ]


def _canary(rng, step: int, weight: float, before: float, after: float, question) -> GateResult:
    n = 60 * step
    reward = MetricSamples(
        name="reward", baseline=_samples(rng, before, n), candidate=_samples(rng, after, n)
    )
    return judge("canary", [reward], GATE, step=step, weight=weight, question=question)


def _replay(rng) -> GateResult:
    cases = [
        ReplayCase(
            trajectory_id=f"t{i}",
            tenant=TENANTS[i % 3],
            recorded_success=i % 2 == 0,
            baseline_score=0.9 if i % 2 == 0 else 0.2,
            candidate_score=0.9 if i % 2 == 0 else float(rng.uniform(0.6, 1.0)),
        )
        for i in range(24)
    ]
    return judge_replay(cases, GATE)


def _signals(rng, success: float) -> dict:
    return {
        "trajectories": 480,
        "sessions": 310,
        "tenants": 3,
        "success_rate": success,
        "reward_mean": round(success - 0.05, 2),
        "correction_rate": round(float(rng.uniform(0.05, 0.2)), 3),
        "tool_error_rate": round(float(rng.uniform(0.0, 0.1)), 3),
        "failure_clusters": 2,
    }


def _evolution(tracker, rng, n: int, parent: str, change: dict) -> str:
    """One evolution's records, in the order the activities write them; returns its run id."""
    run_id = tracker.start_run(
        agent=AGENT,
        evolution_id=f"evolution-{AGENT}-2026120{n}T0930",
        workflow_id=f"evolution-{AGENT}-2026120{n}T0930",
        params={"parent_version": parent, "gate": GATE.model_dump(mode="json")},
    )
    scores = {"memory": 0.12, "harness": 0.31, "tool_schema": 0.05, "weights": 0.02, "noop": 0.0}
    decision = {"action": change["action"], "signals": _signals(rng, change["success"])}
    tracker.log_decision(run_id, {**decision, "scores": scores, "reason": change["why"]})
    candidate = change.get("candidate")
    if candidate is not None:
        tracker.log_params(run_id, {"candidate_version": candidate})
        tracker.log_candidate(
            run_id, parent_spec=change["parent_spec"], candidate_spec=change["spec"]
        )
        harness = change["spec"]["harness"]
        tracker.register_prompt(AGENT, candidate, harness, [], run_id=run_id)
        tracker.name_run(run_id, "gating")
    for step, gate in enumerate(change.get("gates", [])):
        tracker.log_gate(run_id, gate.model_dump(mode="json"), step=step)
    if change["outcome"] == "promoted":
        tracker.mirror_prompt_aliases(AGENT, {"stable": candidate, "canary": None})
    tracker.finish(run_id, change["outcome"], action=change["action"])
    return run_id


def _seed(tracker: EvolutionTracker) -> tuple[str, str]:
    """Four evolutions of the agent; returns (experiment id, the promoted fix's run id)."""
    rng = np.random.default_rng(7)
    v1 = _spec("You help customers of our shops.", [])
    v2 = _spec("You help customers of our shops.\nQuote the order id back.", [])
    v3 = _spec(v2["harness"]["instructions"], ["returns-window-30-days"])
    v4 = _spec(v2["harness"]["instructions"] + "\nNever promise refunds.", [])
    tracker.register_prompt(AGENT, f"{AGENT}@v1", v1["harness"], ["stable"])
    skip = [
        GateResult.skipped_gate(g, "skipped by ana: hot-fix")
        for g in ("replay", "shadow", "canary")
    ]
    fix = _evolution(tracker, rng, 1, f"{AGENT}@v1", {
        "action": "harness", "success": 0.58, "outcome": "promoted",
        "why": "orders looked up without the id the user gave",
        "candidate": f"{AGENT}@v2", "parent_spec": v1, "spec": v2,
        "gates": [_replay(rng)] + [
            _canary(rng, s, w, 0.5, 0.9, Question.SUPERIORITY) for s, w in ((1, 0.1), (2, 0.5))
        ],
    })  # fmt: skip
    _evolution(tracker, rng, 2, f"{AGENT}@v2", {
        "action": "memory", "success": 0.71, "outcome": "rolled_back",
        "why": "a recurring missing fact: the returns window",
        "candidate": f"{AGENT}@v3", "parent_spec": v2, "spec": v3,
        "gates": [_replay(rng), _canary(rng, 1, 0.1, 0.75, 0.45, Question.NON_INFERIORITY)],
    })  # fmt: skip
    _evolution(tracker, rng, 3, f"{AGENT}@v2", {
        "action": "harness", "success": 0.7, "outcome": "promoted", "why": "a person's hot-fix",
        "candidate": f"{AGENT}@v4", "parent_spec": v2, "spec": v4, "gates": skip,
    })  # fmt: skip
    _evolution(tracker, rng, 4, f"{AGENT}@v4", {
        "action": "noop", "success": 0.78, "outcome": "noop",
        "why": "too little evidence for any change",
    })  # fmt: skip
    return tracker.experiment_for(AGENT), fix


if __name__ == "__main__":
    main()
