"""macOS integration: `defaults` and `launchctl`, DebugSymbols registration, the launchd agent."""
