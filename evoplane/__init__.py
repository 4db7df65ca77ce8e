"""evoplane."""
