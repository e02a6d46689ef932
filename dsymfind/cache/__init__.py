"""The cache on disk and what acts on it: entries, the UUID tree, placement, gc, check, index."""
