"""`dsymfind config`: the effective configuration and where each value came from."""

from __future__ import annotations

import json
import os

from dsymfind import settings

_DEBUGSYMBOLS_KEYS = {
    "debugsymbols_file_mapped_paths": "DBGFileMappedPaths",
    "debugsymbols_search_paths": "DBGSearchPaths",
}


def show_config(*, as_json: bool) -> int:
    current = settings.load(os.environ)
    if as_json:
        print(json.dumps(current, indent=2))
        return 0
    print(f"config file: {current['config_file']}")
    origins = current["origins"]
    for key, value in current.items():
        if key in ("config_file", "origins"):
            continue
        origin = origins.get(key) or f"DebugSymbols preferences {_DEBUGSYMBOLS_KEYS.get(key, '')}"
        print(f"{key} = {_format(value)}  # {origin}")
    return 0


def _format(value: object) -> str:
    return json.dumps(value)
