"""One thing ``wf doctor`` found: what kind, about what, in words, how bad, and whether
--fix repaired it."""

from __future__ import annotations

from typing import Any, NamedTuple


class Finding(NamedTuple):
    kind: str
    subject: str
    message: str
    level: str  # "problem" or "info"
    fixed: bool = False

    def __str__(self) -> str:
        state = " [fixed]" if self.fixed else " (info)" if self.level == "info" else ""
        return f"{self.kind}: {self.subject}: {self.message}{state}"

    def as_dict(self) -> dict[str, Any]:
        return self._asdict()
