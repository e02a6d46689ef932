"""The one expected-failure type; anything else escaping a command is a bug."""


class DsymfindError(Exception):
    """A failure the user can act on; its message is written for them, in one line."""


class ConfigError(DsymfindError):
    """The configuration file, environment or DebugSymbols preferences are unusable."""
