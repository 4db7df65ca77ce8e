"""The demo: four shops' support bot drifts, and Evoplane evolves it (`evoplane demo`).

`world` (the shops, what customers ask, the fact lines), `tools` (the commerce platform's
validated tools), `agent` (the bot on the plain openai SDK), `users` (the customers and
their reactions), `drifts` (the scheduled rounds), `runner` (traffic and evolutions through
the control API), `report` (the tables and the facts they must show), `stack` (a running
or embedded stack), `tiny` (the tiny Qwen2 and byte tokenizer that `model/` started from,
also built by `evoplane model init-tiny` and the tests), `warm_start` (how `model/` was made).
"""

__all__: list[str] = []
