"""One module per admin verb; each exposes one function returning an exit code."""
