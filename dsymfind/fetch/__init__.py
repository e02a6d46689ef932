"""Asking the stores: the helper's miss path, the detached downloader, every store at once
(fetcher), the negative cache and backoff, batch fetches and the PDB search."""
