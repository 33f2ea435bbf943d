"""Rows grouped by importance, each group ordered by last access (newest first): the memory stream's list A without
a pass over every memory.

A retrieval's pre-selection (stream.py) needs the memories with the best partial score
p = w_rec * rec_n + w_imp * imp_n, an upper bound on p outside them, and the recency and importance bounds of the
eligible memories. Within one importance value p only grows with last access, so the best of a group are its
newest rows and the first row left out bounds the rest of the group. With a handful of importance values (the
agent's ratings are whole numbers 1-10) that is a few short walks instead of ~6 passes over a million rows.

Last access only moves forward and new memories are the newest, so rows changed since the order was built are
kept aside (`fresh`) and merged at query time; past `max_fresh` of them the order is rebuilt (an argsort).
A set-back last access (restoring a store) or too many distinct importances makes the index decline, and the
stream takes its full numpy path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Heads:
    """What a walk found for one query: list A's rows, the rows that bound p outside A (one per group), and the
    eligible memories' last-access and importance extremes."""
    rows: np.ndarray
    next_rows: np.ndarray
    la_min: float
    la_max: float
    imp_min: float
    imp_max: float


class RecencyIndex:
    def __init__(self, max_groups: int = 16, max_fresh: int = 2048, walk_budget: int = 50_000) -> None:
        self.max_groups, self.max_fresh, self.walk_budget = max_groups, max_fresh, walk_budget
        self.built_n = -1  # rows covered by the order; -1: not built
        self.usable = True
        self.groups: list[tuple[float, np.ndarray]] = []  # (importance, rows newest first)
        self.fresh: set[int] = set()
        self._fresh_arr: np.ndarray | None = None

    def invalidate(self) -> None:
        self.built_n = -1
        self.fresh.clear()
        self._fresh_arr = None

    def changed(self, rows) -> None:
        """Rows whose last access moved forward, or new rows."""
        if self.built_n < 0:
            return
        self.fresh.update(int(r) for r in np.atleast_1d(rows))
        self._fresh_arr = None
        if len(self.fresh) > self.max_fresh:
            self.invalidate()

    def set_back(self) -> None:
        """A last access moved backwards: the order no longer bounds anything until rebuilt."""
        self.invalidate()

    def _build(self, la: np.ndarray, imp: np.ndarray, seq: np.ndarray) -> None:
        n = la.size
        values = np.unique(imp)
        self.usable = values.size <= self.max_groups
        self.groups = []
        if self.usable:
            order = np.lexsort((-seq, -la))  # newest last access first, then the newest memory
            g = imp[order]
            for v in values:
                self.groups.append((float(v), order[g == v]))
        self.built_n, self.fresh, self._fresh_arr = n, set(), None

    def heads(self, la: np.ndarray, imp: np.ndarray, seq: np.ndarray, mask: np.ndarray | None,
              m: int) -> Heads | None:
        """List A (the m newest eligible rows of every importance group, and every eligible fresh row), or None when
        the index cannot answer cheaply (the stream then scans)."""
        n = la.size
        if self.built_n < 0 or not self.usable:
            self._build(la, imp, seq)
        elif n != self.built_n:  # rows appended since the build are fresh
            self.fresh.update(range(self.built_n, n))
            self._fresh_arr = None
            self.built_n = n
            if len(self.fresh) > self.max_fresh:
                self._build(la, imp, seq)
        if not self.usable:
            return None
        if self._fresh_arr is None:
            self._fresh_arr = np.fromiter(sorted(self.fresh), dtype=np.int64, count=len(self.fresh))
        fresh = self._fresh_arr
        fresh_ok = fresh if mask is None else fresh[mask[fresh]]
        is_fresh = np.zeros(n, dtype=bool) if fresh.size else None
        if is_fresh is not None:
            is_fresh[fresh] = True
        take, nxt, los, his, imps = [fresh_ok], [], [], [], []
        if fresh_ok.size:
            los.append(float(la[fresh_ok].min()))
            his.append(float(la[fresh_ok].max()))
            imps.extend(np.unique(imp[fresh_ok]).tolist())
        for value, order in self.groups:
            # the group's stable rows (fresh ones are taken above with their current last access)
            head, tail, found = self._walk(order, mask, is_fresh, m + 1)
            if head is None:
                return None
            if found:
                imps.append(value)
                his.append(float(la[head[0]]))
                los.append(float(la[tail]))
                take.append(head[:m])
                if head.size > m:
                    nxt.append(int(head[m]))
        if not his:
            return None
        rows = np.unique(np.concatenate(take))
        return Heads(rows=rows, next_rows=np.asarray(nxt, dtype=np.int64), la_min=min(los), la_max=max(his),
                     imp_min=min(imps), imp_max=max(imps))

    def _walk(self, order: np.ndarray, mask: np.ndarray | None, is_fresh: np.ndarray | None,
              want: int) -> tuple[np.ndarray | None, int, bool]:
        """The first `want` eligible stable rows of a group (newest first) and its oldest eligible stable row;
        (None, ..) when that takes more than the walk budget."""
        def ok(rows: np.ndarray) -> np.ndarray:
            keep = np.ones(rows.size, dtype=bool)
            if mask is not None:
                keep &= mask[rows]
            if is_fresh is not None:
                keep &= ~is_fresh[rows]
            return rows[keep]

        head: list[np.ndarray] = []
        got, pos, step = 0, 0, max(64, 4 * want)
        while got < want and pos < order.size:
            if pos > self.walk_budget:
                return None, -1, False
            part = ok(order[pos: pos + step])
            head.append(part)
            got += part.size
            pos += step
            step *= 2
        h = np.concatenate(head)[:want] if head else np.empty(0, dtype=np.int64)
        if h.size == 0:
            return h, -1, False
        pos, step = order.size, 64
        while pos > 0:
            if order.size - pos > self.walk_budget:
                return None, -1, False
            part = ok(order[max(0, pos - step): pos])
            if part.size:
                return h, int(part[-1]), True
            pos -= step
            step *= 2
        return h, int(h[-1]), True
