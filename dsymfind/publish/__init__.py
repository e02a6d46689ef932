"""Publishing symbols into a store that every developer's helper fetches from."""
