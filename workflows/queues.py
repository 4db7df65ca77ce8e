"""Task queues: orchestration and light work on one, training and heavy evaluation on the other.

Workers started with `--gpu` (or, on a CPU-only machine, the one `evoplane up` starts for
tiny models) serve GPU_QUEUE; every worker serves CONTROL_QUEUE.
"""

from __future__ import annotations

__all__ = ["CONTROL_QUEUE", "GPU_QUEUE"]

CONTROL_QUEUE = "evoplane-control"
GPU_QUEUE = "evoplane-gpu"
