"""The invariants that the property tests and `scripts/fuzz` check on every reader."""
