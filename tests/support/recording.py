"""What a handler test injects to see what happened: the operations a real client sent, the sleeps it asked for."""

from __future__ import annotations

from typing import Any


class Recorder:
    """Records the operations a real client sends, to prove what did (not) happen."""

    def __init__(self, client: Any) -> None:
        self.calls: list[tuple[str, dict]] = []
        client.meta.events.register("provide-client-params", self._record)

    def _record(self, params: dict, model: Any, **_: Any) -> None:
        self.calls.append((model.name, dict(params)))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class Sleeps(list):
    """An injected sleep that records the delays instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        assert seconds >= 0
        self.append(seconds)
