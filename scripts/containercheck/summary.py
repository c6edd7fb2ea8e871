"""The figures of a run, printed as an aligned table at its end, whatever happened."""

from __future__ import annotations


class Summary:
    def __init__(self) -> None:
        self.rows: list[tuple[str, str]] = []

    def add(self, label: str, value: str) -> None:
        print(f"{label}: {value}", flush=True)
        self.rows.append((label, value))

    def render(self) -> str:
        width = max((len(label) for label, _ in self.rows), default=0)
        return "\n".join(f"{label:<{width}}  {value}" for label, value in self.rows)
