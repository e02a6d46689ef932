"""dsymfind: finds, fetches and verifies debug symbols for lldb and friends.

This module is imported on the helper's hot path: it must stay free of imports.
"""

__version__ = "0.1.0"
