"""DebugSymbols' vocabulary: the keys of the helper's answers and of its preferences.

docs/helper-contract.md says who reads each key. Imported on the helper's hot path:
constants only.
"""

# The per-UUID dictionary the helper prints (and a dSYM's per-UUID plist holds).
DSYM_PATH = "DBGDSYMPath"
SYMBOL_RICH_EXECUTABLE = "DBGSymbolRichExecutable"
ARCHITECTURE = "DBGArchitecture"
BUILD_SOURCE_PATH = "DBGBuildSourcePath"
SOURCE_PATH = "DBGSourcePath"
SOURCE_PATH_REMAPPING = "DBGSourcePathRemapping"
ERROR = "DBGError"
# Written into the cache's own per-UUID plists: where a download came from, and the format.
DOWNLOADED_FROM = "DBGDownloadedFrom"
VERSION = "DBGVersion"
# dsymfind's own too: where and at which commit the build was made (vcs/provenance.py).
SOURCE_CONTROL = "DBGSourceControl"

# The com.apple.DebugSymbols preferences.
SHELL_COMMANDS = "DBGShellCommands"
FILE_MAPPED_PATHS = "DBGFileMappedPaths"
SEARCH_PATHS = "DBGSearchPaths"
SPOTLIGHT_PATHS = "DBGSpotlightPaths"
