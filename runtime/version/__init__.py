"""The version runtime: an agent version applied to a request, the same way by the gateway,
its shadow copy, the replay gate and the operators that prove a candidate.

- `overlays`: the request a version sends upstream (harness, memory, skills, tool schemas,
  guardrails, model route), and its answer mapped back to the agent's names.
- `memory`: which memory items a request gets (BM25 over their content).
- `skills`: which skills a request gets, within their scope and budget, and how they read.
- `bm25`: the lexical ranking both retrievals use.
"""
