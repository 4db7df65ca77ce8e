"""The shared runtimes: what serving (`proxy/`), replay and training (`evolution/`) must do the
same way, below both, so neither imports the other.

- `model`: a checkpoint loaded, a request rendered to token ids, a token sampled.
- `version`: an agent version applied to a request (harness, memory and skill retrieval,
  tool-schema rewrites, guardrails, model route).
- `lexicon`: the words a user's follow-up says an answer did not do by, in 26 languages.

Like `atdp`, these import nothing else of ours; heavy libraries (torch, transformers) are
imported inside the functions that need them, so `import proxy` stays fast.
"""
