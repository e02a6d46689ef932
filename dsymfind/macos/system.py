"""The macOS tools install and doctor drive: `defaults` and `launchctl`, run or only shown.

Every command that changes the system goes through `System.change`, so `--dry-run`
prints exactly what a real run would do. Reads always run: the plan depends on them.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from typing import TextIO

from dsymfind.apple import plists
from dsymfind.errors import DsymfindError

DEBUGSYMBOLS_DOMAIN = "com.apple.DebugSymbols"
# `defaults` and `launchctl` answer in milliseconds; a hang must not hang install.
COMMAND_TIMEOUT = 30.0

PrefValue = str | list[str]


class System:
    def __init__(self, *, dry_run: bool, out: TextIO | None = None) -> None:
        self.dry_run = dry_run
        self.out = out if out is not None else sys.stdout

    def tool(self, name: str) -> str:
        """The path of a macOS tool; missing is an error except when only showing commands."""
        found = shutil.which(name)
        if found is None:
            if self.dry_run:
                return name
            raise DsymfindError(
                f"`{name}` not found: this registers dsymfind with macOS and needs macOS "
                "(`--dry-run` shows the commands it would run)"
            )
        return found

    def has(self, name: str) -> bool:
        return shutil.which(name) is not None

    def change(self, argv: list[str], *, allow_failure: bool = False) -> bool:
        """Run (or with --dry-run print) a command that changes the system; True on success."""
        if self.dry_run:
            print(shlex.join(argv), file=self.out)
            return True
        done = self.run(argv)
        if done.returncode != 0 and not allow_failure:
            detail = done.stderr.strip() or f"exit status {done.returncode}"
            raise DsymfindError(f"`{shlex.join(argv)}` failed: {detail}")
        return done.returncode == 0

    def note(self, text: str) -> None:
        """A step that is not a command (a file written, a link made), shown on a dry run."""
        if self.dry_run:
            print(f"# {text}", file=self.out)

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise DsymfindError(f"cannot run `{shlex.join(argv)}`: {exc}") from None

    # DebugSymbols preferences

    def read_debugsymbols(self) -> dict[str, object]:
        """The domain's current values; empty when `defaults` is missing on a dry run."""
        if not self.has("defaults"):
            self.tool("defaults")  # raises unless dry
            return {}
        argv = [self.tool("defaults"), "export", DEBUGSYMBOLS_DOMAIN, "-"]
        done = self.run(argv)
        if done.returncode != 0:
            raise DsymfindError(f"`{shlex.join(argv)}` failed: {done.stderr.strip()}")
        try:
            data = plists.loads(done.stdout.encode())
        except plists.UnreadablePlist as exc:
            raise DsymfindError(f"`{shlex.join(argv)}` printed an {exc}") from None
        return data if isinstance(data, dict) else {}

    def write_pref(self, key: str, value: PrefValue) -> None:
        kind = ["-string", value] if isinstance(value, str) else ["-array", *value]
        self.change([self.tool("defaults"), "write", DEBUGSYMBOLS_DOMAIN, key, *kind])

    def delete_pref(self, key: str) -> None:
        self.change([self.tool("defaults"), "delete", DEBUGSYMBOLS_DOMAIN, key])

    # launchd

    def gui_domain(self) -> str:
        return f"gui/{os.getuid()}"
