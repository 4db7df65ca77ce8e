"""The shared runtimes: what serving (`proxy/`), replay and training (`evolution/`) must do the
same way, below both, so neither imports the other.

- `model`: a checkpoint loaded, a request rendered to token ids, a token sampled.

Like `atdp`, these import nothing else of ours; heavy libraries (torch, transformers) are
imported inside the functions that need them, so `import proxy` stays fast.
"""
