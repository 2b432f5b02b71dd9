"""Building a testbed and tearing it down: whatever was started, stopped in
reverse, also when the building fails half-way."""

from collections.abc import Callable
from typing import Self


def stop_all(parts: list[Callable[[], None]], log: Callable[[str], None]) -> None:
    """Each stop in the reverse order of the starts; one that fails is
    logged and the rest still run (nothing may be left on the machine)."""
    for stop in reversed(parts):
        try:
            stop()
        except Exception as error:  # the rest must still go
            log(f"teardown: {error}")
    parts.clear()


class Emulated:
    """A context manager that builds on entry and always tears down."""

    def unavailable(self) -> str | None:
        """None when this machine can build it, else what is missing."""
        raise NotImplementedError

    def _build(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        why = self.unavailable()
        if why is not None:
            raise RuntimeError(f"cannot build the testbed: {why}")
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
