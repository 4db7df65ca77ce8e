"""`POST /v1/traces`: the gateway as an OTLP/HTTP trace receiver.

OTLP's exporters (every OpenTelemetry SDK's, the Collector's `otlphttp`) point their traces
endpoint here with a tenant key in `Authorization: Bearer ...`, and the agent's name in
`X-Evoplane-Agent` (else it is read from the spans). The answer is OTLP's own
`ExportTraceServiceResponse` in the request's encoding; errors come in OpenAI's shape, like
every gateway error, with OTLP's status codes (400 for a body that is not OTLP, which
exporters do not retry; 429 and 503, which they do).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response

from proxy.errors import GatewayError
from proxy.governance import parse_training_header
from proxy.otlp.decode import (
    OtlpDecodeError,
    decode_spans,
    decompress,
    encode_response,
    encoding_of,
)
from proxy.otlp.ingest import TraceIngest

__all__ = ["export_traces"]

_MAX_IDS_IN_HEADER = 100
_CODES = {413: "body_too_large", 415: "unsupported_media_type"}


async def export_traces(request: Request) -> Response:
    service = request.app.state.service
    limit = service.config.max_body_bytes
    body = await _read_body(request, limit)
    identity = await service.access.authenticate(request.headers.get("authorization"))
    service.rate_limit.check(identity.tenant)
    try:
        opt_out = parse_training_header(request.headers.get("x-evoplane-training"))
        encoding = encoding_of(request.headers.get("content-type"))
        spans = decode_spans(
            decompress(body, request.headers.get("content-encoding"), limit), encoding
        )
    except OtlpDecodeError as error:
        raise GatewayError(
            error.status, str(error), code=_CODES.get(error.status, "invalid_otlp")
        ) from None
    except ValueError as error:  # the training header
        raise GatewayError(
            400, str(error), param="X-Evoplane-Training", code="invalid_header"
        ) from None
    result = await _ingest(request).ingest(
        identity,
        spans,
        agent=request.headers.get("x-evoplane-agent"),
        training_opt_out=opt_out,
    )
    headers = {}
    if result.trajectories:
        ids = dict.fromkeys(str(t) for t in result.trajectories)
        headers["X-Evoplane-Trajectory-Id"] = ",".join(list(ids)[:_MAX_IDS_IN_HEADER])
    return Response(
        encode_response(encoding, result.rejected, result.message()),
        media_type=encoding,
        headers=headers,
    )


def _ingest(request: Request) -> TraceIngest:
    """The app's ingest, made for the gateway its lifespan started (its book of traces
    lives as long as that gateway)."""
    state = request.app.state
    ingest = getattr(state, "otlp_ingest", None)
    if ingest is None or ingest.service is not state.service:
        ingest = state.otlp_ingest = TraceIngest(state.service)
    return ingest


async def _read_body(request: Request, limit: int) -> bytes:
    """The raw body; 413 past `limit` bytes, declared or read."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, f"Request body is larger than the {limit}-byte limit.", code="body_too_large"
    )
