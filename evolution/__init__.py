"""evolution."""
