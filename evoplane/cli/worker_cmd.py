"""`evoplane worker`: a Temporal worker for evolutions, in the foreground."""

from __future__ import annotations

import asyncio
import logging
import os
import sys

import typer

from evoplane.settings import load_settings


def worker(
    gpu: bool = typer.Option(
        False,
        "--gpu",
        help="Also serve evoplane-gpu (training, heavy evaluation; tiny models only without CUDA).",
    ),
    no_tracking: bool = typer.Option(
        False, "--no-tracking", help="Run without MLflow (evolutions are still recorded)."
    ),
) -> None:
    """Run a worker for evolution workflows and their activities (Ctrl-C stops it)."""
    from evoplane.worker import run_workers

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    # MLflow retries for minutes by default; Temporal retries the activity instead.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    settings = load_settings()
    try:
        asyncio.run(run_workers(settings, gpu=gpu, tracking=not no_tracking))
    except KeyboardInterrupt:
        pass
    # The workers have stopped and nothing is left to clean up. The Temporal SDK's native
    # threads may still call into Python while the interpreter finalizes, which aborted
    # one stop in about ten here ("PyGILState_Release: thread state ... must be current"),
    # so the process exits without finalizing, once its output is flushed.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
