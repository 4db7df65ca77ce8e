"""Memory as an operator: facts distilled from a window's corrections (`distil`), the items of
a candidate (`operator`). Retrieving them for a request is the version runtime's
(`runtime.version.memory`)."""
