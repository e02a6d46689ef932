"""`dsymfind publish --xcode`: the inputs of a Run Script build phase, from the build
settings Xcode puts in its environment.

The dSYM is `${DWARF_DSYM_FOLDER_PATH}/${DWARF_DSYM_FILE_NAME}`; the product whose images
are checked is `${TARGET_BUILD_DIR}/${WRAPPER_NAME}` (its Info.plist at
`${TARGET_BUILD_DIR}/${INFOPLIST_PATH}`). Only these are read: with user-script sandboxing
on, a phase may read only the input files it declares (docs/publishing.md lists them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

# Lines that begin so are the build's warnings and errors in Xcode's issue navigator.
WARNING, ERROR = "warning: ", "error: "


class Inputs(NamedTuple):
    dsyms: list[str]  # what to publish
    product: str | None  # what to check
    info_plist: str | None
    warnings: list[str]  # why something is not there


def inputs(environ: Mapping[str, str]) -> Inputs:
    warnings = []
    dsyms = []
    folder, name = environ.get("DWARF_DSYM_FOLDER_PATH"), environ.get("DWARF_DSYM_FILE_NAME")
    if not folder or not name:
        warnings.append(
            "DWARF_DSYM_FOLDER_PATH and DWARF_DSYM_FILE_NAME are not set: run this from an "
            "Xcode build phase"
        )
    elif not os.path.isdir(os.path.join(folder, name)):
        warnings.append(
            f"no dSYM at {os.path.join(folder, name)}: set DEBUG_INFORMATION_FORMAT to "
            "dwarf-with-dsym, and list it among the phase's input files"
        )
    else:
        dsyms.append(os.path.join(folder, name))
    build_dir, wrapper = environ.get("TARGET_BUILD_DIR"), environ.get("WRAPPER_NAME")
    product = os.path.join(build_dir, wrapper) if build_dir and wrapper else None
    if product is not None and not os.path.exists(product):
        warnings.append(f"no product at {product}: its images are not checked")
        product = None
    plist_path = environ.get("INFOPLIST_PATH")
    info_plist = os.path.join(build_dir, plist_path) if build_dir and plist_path else None
    return Inputs(dsyms, product, info_plist, warnings)
