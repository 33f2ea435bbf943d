"""Bounds on what a classroom's visitors can make the server do: passcode guessing and model calls.

Pure bookkeeping with an injectable clock (tests drive time by hand); views/share.py and the Ask page use one
instance of each per server. Keys are a browser session's id and a client address, never a passcode or a question.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Callable

Clock = Callable[[], float]


class SlidingWindow:
    """Events per key in the last `window_s` seconds; at most `max_keys` keys are remembered (oldest dropped), so
    a flood of distinct keys costs bounded memory."""

    def __init__(self, window_s: float, clock: Clock = time.monotonic, max_keys: int = 4096) -> None:
        self.window_s, self.clock, self.max_keys = window_s, clock, max_keys
        self._events: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _trimmed(self, key: str, now: float) -> deque[float]:
        q = self._events.get(key)
        if q is None:
            q = self._events[key] = deque()
            while len(self._events) > self.max_keys:
                self._events.popitem(last=False)
        self._events.move_to_end(key)
        while q and now - q[0] >= self.window_s:
            q.popleft()
        return q

    def count(self, key: str) -> int:
        with self._lock:
            return len(self._trimmed(key, self.clock()))

    def add(self, key: str) -> None:
        with self._lock:
            self._trimmed(key, self.clock()).append(self.clock())

    def wait_s(self, key: str, limit: int) -> float:
        """0 when fewer than `limit` events are in the window, else the seconds until the oldest leaves it."""
        with self._lock:
            now = self.clock()
            q = self._trimmed(key, now)
            if len(q) < limit:
                return 0.0
            return max(0.0, self.window_s - (now - q[len(q) - limit]))

    def clear(self, key: str) -> None:
        with self._lock:
            self._events.pop(key, None)


@dataclass
class _SessionFails:
    n: int = 0
    last: float = 0.0


class PasscodeGuard:
    """Slows passcode guessing without letting one visitor lock anyone else out.

    - per browser session: the first FREE_TRIES wrong passcodes cost nothing, then each one doubles the wait before
      that session's next try (2 s, 4 s, ... at most MAX_BACKOFF_S); a right passcode clears it;
    - per client address: at most ADDRESS_FAILS wrong passcodes in ADDRESS_WINDOW_S, then that address waits.
    Nothing is counted server-wide, so a student typing wrong passcodes (in one browser or many on their own
    machine) never stops the teacher's right one from another browser on another machine. The check comes before
    the comparison: a session or address that must wait gets no answer about the passcode at all."""

    FREE_TRIES = 3
    MAX_BACKOFF_S = 300.0
    ADDRESS_FAILS, ADDRESS_WINDOW_S = 30, 600.0

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self.clock = clock
        self._sessions: OrderedDict[str, _SessionFails] = OrderedDict()
        self._addresses = SlidingWindow(self.ADDRESS_WINDOW_S, clock)
        self._lock = threading.Lock()

    def _session(self, key: str) -> _SessionFails:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = _SessionFails()
            while len(self._sessions) > 4096:
                self._sessions.popitem(last=False)
        return s

    def session_wait_s(self, session: str) -> float:
        with self._lock:
            s = self._session(session)
            if s.n < self.FREE_TRIES:
                return 0.0
            backoff = min(self.MAX_BACKOFF_S, 2.0 ** (s.n - self.FREE_TRIES + 1))
            return max(0.0, backoff - (self.clock() - s.last))

    def wait_s(self, session: str, address: str) -> float:
        """Seconds this session (or its address) must wait before its next try; 0 = it may try now."""
        return max(self.session_wait_s(session), self._addresses.wait_s(address, self.ADDRESS_FAILS))

    def failed(self, session: str, address: str) -> None:
        with self._lock:
            s = self._session(session)
            s.n, s.last = s.n + 1, self.clock()
        self._addresses.add(address)

    def succeeded(self, session: str) -> None:
        with self._lock:
            self._sessions.pop(session, None)


@dataclass(eq=False)  # a ticket is itself: two visitors' tickets never compare equal
class Ticket:
    """A visitor's place in the model queue: `position()` 0 = it may call the model now."""

    queue: "ModelQueue"
    session: str
    number: int
    released: bool = field(default=False)

    def position(self) -> int:
        return self.queue.position(self)

    def release(self) -> None:
        self.queue.release(self)


class QueueRefused(Exception):
    """A visitor's model call was not queued; the message says why and when to try again, in plain words."""


class ModelQueue:
    """Visitors' model calls on the operator's machine, one at a time, first come first served, within limits:
    at most `per_session` calls per browser and `per_hour` for all visitors in any hour, and at most `max_waiting`
    waiting at once. A refused call says why; a queued one knows its position."""

    def __init__(self, per_session: int, per_hour: int, max_waiting: int, clock: Clock = time.monotonic,
                 session_window_s: float = 3600.0) -> None:
        self.per_session, self.per_hour, self.max_waiting = per_session, per_hour, max_waiting
        self.clock = clock
        self._by_session = SlidingWindow(session_window_s, clock)
        self._all = SlidingWindow(3600.0, clock, max_keys=1)
        self._line: list[Ticket] = []
        self._next = 0
        self._lock = threading.Lock()

    def join(self, session: str) -> Ticket:
        """A place in the queue, counted against the limits at once; raises QueueRefused."""
        with self._lock:
            if any(t.session == session for t in self._line):
                raise QueueRefused("Your previous question is still waiting for the model: one at a time.")
            wait = self._by_session.wait_s(session, self.per_session)
            if wait > 0:
                raise QueueRefused(f"You have asked the model {self.per_session} times in this hour, the limit "
                                   f"for each browser in this class: try again in {wait / 60:.0f} min. The "
                                   f"memories still answer every question.")
            wait = self._all.wait_s("all", self.per_hour)
            if wait > 0:
                raise QueueRefused(f"The class has used its {self.per_hour} model answers for this hour: try again "
                                   f"in {wait / 60:.0f} min. The memories still answer every question.")
            if len(self._line) >= self.max_waiting:
                raise QueueRefused(f"{len(self._line)} questions are already waiting for the model: try again in a "
                                   f"minute. The memories still answer every question.")
            self._by_session.add(session)
            self._all.add("all")
            self._next += 1
            t = Ticket(self, session, self._next)
            self._line.append(t)
            return t

    def position(self, ticket: Ticket) -> int:
        with self._lock:
            try:
                return self._line.index(ticket)
            except ValueError:
                return -1

    def release(self, ticket: Ticket) -> None:
        with self._lock:
            if ticket in self._line:
                self._line.remove(ticket)
            ticket.released = True

    def waiting(self) -> int:
        with self._lock:
            return len(self._line)
