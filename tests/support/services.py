"""What the suite's servers share: a `with` block starts one and always stops it."""

from __future__ import annotations

from typing import Self


class Service:
    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
