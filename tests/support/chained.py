"""A team's own `dsymForUUID`, as a real script: what dsymfind chains (`command:` servers)."""

from __future__ import annotations

import plistlib
from pathlib import Path


class TheirHelper:
    """A helper script of the team's own: it notes each run's arguments, prints `answer`."""

    def __init__(self, folder: Path, answer: bytes, *, before: str = "") -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / "dsymForUUID"
        self.runs = folder / "runs"
        self.pid = folder / "pid"
        (folder / "answer.plist").write_bytes(answer)
        self.path.write_text(
            "#!/bin/sh\n"
            f"echo $$ > '{self.pid}'\n"
            f"echo \"$@\" >> '{self.runs}'\n"
            f"{before}\n"
            f"cat '{folder / 'answer.plist'}'\n"
        )
        self.path.chmod(0o755)

    def argvs(self) -> list[str]:
        return self.runs.read_text().splitlines() if self.runs.exists() else []


def answer(uuid: str, **values: str) -> bytes:
    return plistlib.dumps({uuid: values} if values else {})
