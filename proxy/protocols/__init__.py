"""The protocols agents speak, translated to and from the gateway's one pipeline.

The gateway's pipeline (route, overlays, upstream, capture) works on chat-completions
requests and answers. An agent speaking the OpenAI Responses API or Anthropic's Messages
API is served by translating its request into a chat-completions request, running that
pipeline, and translating the answer (or each streamed chunk) back. So a version's
harness, memory, tool schemas and argument maps apply whatever the protocol, and every
llm_call is the same ATDP event: it records, besides, the protocol it came in on and the
request as the agent sent it (`atdp.PROTOCOL_REQUEST`), so a replay can speak it again.

- `responses`: `/v1/responses` (OpenAI Responses API).
- `messages`: `/v1/messages` (Anthropic Messages API).
- `serving`: what the HTTP routes of both share (the pipeline call, streams, errors).


Translation errors are `proxy.errors.GatewayError`s (400 with the offending parameter);
each protocol's routes render them in that protocol's error shape.
"""
