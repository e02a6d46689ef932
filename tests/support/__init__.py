"""Code the tests share: real fixtures, real processes, a real symbol server."""
