"""The words that say why an image has no dSYM (or that it has one), as `dsymfind why`
gives them and `symbolicate` prints them on each image it leaves bare (docs/why.md). A
module of its own: symbolicate reads them without loading the fetching code."""

from __future__ import annotations

FOUND = "found"
# Every store asked answered that it does not have it.
ABSENT = "absent"
# A store refused the credentials: its answer is unknown until a setting is fixed.
REFUSED = "refused"
# A store did not answer (network, timeout, 5xx): its answer is unknown for now.
UNREACHABLE = "unreachable"
# No dSYM for this UUID, but a build record has an image of the same name.
OTHER_BUILD = "other-build"
# A dSYM of the same name for another architecture.
WRONG_SLICE = "wrong-slice"
# A stub executable whose code is in NAME.debug.dylib: it needs no dSYM.
STUB = "stub"

# The image of a stub executable that holds its code (Xcode's ENABLE_DEBUG_DYLIB).
DEBUG_DYLIB_SUFFIX = ".debug.dylib"
