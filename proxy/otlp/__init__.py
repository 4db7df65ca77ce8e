"""OpenTelemetry in: GenAI spans over OTLP/HTTP, recorded as trajectories.

`decode` reads OTLP requests (protobuf or JSON), `messages` and `genai` read spans after the
GenAI semantic conventions, `trace` turns a trace's operations into ATDP events, `ingest`
authorises, routes, governs and writes them, and `routes` is the `POST /v1/traces` handler.
"""

from proxy.otlp.routes import export_traces

__all__ = ["export_traces"]
