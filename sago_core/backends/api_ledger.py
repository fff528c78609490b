"""The run's API spending: an append-only ledger on disk, checked before every request.

Each real call (never a cache hit) appends one JSON line: request key, tokens, cost. A
resumed run reads the ledger back, so money spent before a crash counts once and cached
answers cost nothing. A torn last line (killed mid-write) is ignored.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from sago_core.artifacts.store import append_line
from sago_core.config import ApiSpending
from sago_core.errors import SagoError
from sago_core.storage.attached import refresh


class BudgetExhausted(SagoError):
    """The run's API budget is spent; finished answers are kept in the response cache."""


@dataclass
class Spent:
    requests: int = 0
    tokens: int = 0
    cost_usd: float = 0.0


class ApiLedger:
    def __init__(self, path: Path, budget: ApiSpending) -> None:
        self.path = path
        self.budget = budget
        self.spent = Spent()
        self._lock = threading.Lock()
        self._load()

    def _load(self) -> None:
        refresh(self.path)  # on a runs store: what every machine spent, not only this one
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return
        for line in lines:
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # a torn last line
            self._add(entry)

    def _add(self, entry: dict) -> None:
        self.spent.requests += 1
        self.spent.tokens += int(entry.get("tokens") or 0)
        if entry.get("cost_usd") is not None:
            self.spent.cost_usd += float(entry["cost_usd"])

    def exhausted(self) -> str | None:
        """Why no further request may be sent, or None."""
        b, s = self.budget, self.spent
        if b.max_requests is not None and s.requests >= b.max_requests:
            return f"request budget reached ({s.requests} of {b.max_requests})"
        if b.max_tokens is not None and s.tokens >= b.max_tokens:
            return f"token budget reached ({s.tokens} of {b.max_tokens})"
        if b.max_cost_usd is not None and s.cost_usd >= b.max_cost_usd:
            return f"cost budget reached (${s.cost_usd:.4f} of ${b.max_cost_usd:.4f})"
        return None

    def reserve(self) -> None:
        """Count a request before it is sent; raise if the budget allows none."""
        with self._lock:
            why = self.exhausted()
            if why:
                raise BudgetExhausted(
                    f"API {why}; finished answers are cached, raise api.spending and rerun to "
                    "continue where this run stopped"
                )
            self.spent.requests += 1

    def record(self, key: str, model: str, tokens: int, cost_usd: float | None) -> None:
        entry = {"key": key, "model": model, "tokens": tokens, "cost_usd": cost_usd}
        with self._lock:
            self.spent.tokens += tokens
            if cost_usd is not None:
                self.spent.cost_usd += cost_usd
            append_line(self.path, json.dumps(entry))
