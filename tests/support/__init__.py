"""Real servers and helpers that tests and benchmarks share (`tests.support.upstream`)."""
