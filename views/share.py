"""Share mode: a classroom served from one machine is locked to what its operator chose.

Locally (the app bound to 127.0.0.1, the default) nothing here locks anything. Served beyond loopback
(`scripts/app.sh --share`, `SWIFTSAGE_SHARE=1`, a non-loopback `server.address`, or a visitor connecting from
another address), the app is in **share mode**:

- the LLM (backend, embedded model, server URL, model name, API key, CPU threads, timeout) comes from the operator
  (environment, or the TOML file named by `SWIFTSAGE_APP_CONFIG`) and is shown read-only; a page never builds a
  backend from what a visitor typed, so the operator's key only ever goes to the server URL the operator set;
- stores and traces open only under the app's data roots (runs/, evals/, assets/, the configured memory roots),
  and stores are created only under the writable ones (runs/ and the memory roots); anything else is refused
  with a message, before it is read or created;
- a browser starts agent runs or model calls only after the teacher passcode (`SWIFTSAGE_PASSCODE`) was typed in
  it; without it a visitor watches, follows the teacher's run live, replays, compares and asks (the memories that
  answer a question are retrieved; the model phrases the answer only where the operator allows it).
"""
from __future__ import annotations

import dataclasses
import functools
import hmac
import ipaddress
import logging
import os
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from agent_core.config import LLMConfig
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS
from views import sources

ROOT = sources.ROOT
BACKENDS = ("embedded", "openai")
S = st.session_state
log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------- the operator's settings


class OperatorConfigError(ValueError):
    """The operator's settings (environment or config file) cannot be used; the message names the setting."""


@dataclass(frozen=True)
class Operator:
    """What whoever started the app fixed: in share mode the pages use these and nothing a visitor types."""

    backend: str = "embedded"
    embedded_model: str = LLMConfig().embedded_model
    base_url: str = LLMConfig().base_url
    model: str = ""
    n_threads: int = LLMConfig().n_threads
    timeout_s: float = LLMConfig().timeout_s
    passcode: str = ""  # "" = no teacher passcode: in share mode no browser can start a run
    memory_roots: tuple[str, ...] = ()  # more folders whose stores may be opened and created
    visitors_ask_model: bool = False  # in share mode, may a locked browser have the model phrase an Ask answer?

    def llm(self) -> LLMConfig:
        """The LLM settings every page uses in share mode (the key from the environment, as LLMConfig reads it)."""
        return LLMConfig(backend=self.backend, embedded_model=self.embedded_model, base_url=self.base_url,
                         model=self.model, n_threads=self.n_threads, timeout_s=self.timeout_s)

    def llm_label(self) -> str:
        if self.backend == "embedded":
            return f"embedded {EMBEDDED_MODELS[self.embedded_model].title} (on this machine's CPU)"
        return f"OpenAI-compatible server {self.base_url}" + (f", model {self.model}" if self.model else "")


_ENV = {  # environment variable -> Operator field
    "SWIFTSAGE_LLM_BACKEND": "backend", "SWIFTSAGE_DEFAULT_EMBEDDED_MODEL": "embedded_model",
    "SWIFTSAGE_LLM_BASE_URL": "base_url", "SWIFTSAGE_LLM_MODEL": "model", "SWIFTSAGE_LLM_THREADS": "n_threads",
    "SWIFTSAGE_LLM_TIMEOUT": "timeout_s", "SWIFTSAGE_PASSCODE": "passcode",
    "SWIFTSAGE_MEMORY_ROOTS": "memory_roots", "SWIFTSAGE_VISITORS_ASK_MODEL": "visitors_ask_model",
}
_FILE_KEYS = {"llm": ("backend", "embedded_model", "base_url", "model", "n_threads", "timeout_s"),
              "class": ("passcode", "memory_roots", "visitors_ask_model")}


def _coerce(name: str, value, where: str):
    kind = {f.name: f.type for f in dataclasses.fields(Operator)}[name]
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text not in ("1", "0", "true", "false", "yes", "no", "on", "off", ""):
                raise ValueError(value)
            return text in ("1", "true", "yes", "on")
        if kind == "tuple[str, ...]":
            items = value if isinstance(value, list) else str(value).split(os.pathsep)
            return tuple(str(v) for v in items if str(v).strip())
        return str(value)
    except (TypeError, ValueError):
        raise OperatorConfigError(f"{where}: {value!r} is not a valid {kind} for {name}") from None


def _read_file(path: str) -> dict:
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise OperatorConfigError(f"SWIFTSAGE_APP_CONFIG: cannot read {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise OperatorConfigError(f"SWIFTSAGE_APP_CONFIG: {path} is not valid TOML: {e}") from None
    out = {}
    for section, body in data.items():
        if section not in _FILE_KEYS or not isinstance(body, dict):
            raise OperatorConfigError(f"{path}: unknown section [{section}] (allowed: {', '.join(_FILE_KEYS)})")
        for key, value in body.items():
            if key not in _FILE_KEYS[section]:
                raise OperatorConfigError(f"{path}: unknown key {section}.{key} (allowed in [{section}]: "
                                          f"{', '.join(_FILE_KEYS[section])})")
            out[key] = _coerce(key, value, f"{path} [{section}] {key}")
    return out


def operator() -> Operator:
    """The operator's settings: defaults, then the config file (SWIFTSAGE_APP_CONFIG), then the environment.
    Read on every call (cheap), so a test or a restarted server sees its own values."""
    values: dict = {}
    if os.environ.get("SWIFTSAGE_APP_CONFIG"):
        values.update(_read_file(os.environ["SWIFTSAGE_APP_CONFIG"]))
    for env, name in _ENV.items():
        raw = os.environ.get(env)
        if raw is not None and raw != "":
            values[name] = _coerce(name, raw, env)
    op = Operator(**values)
    if op.backend not in BACKENDS:
        raise OperatorConfigError(f"LLM backend {op.backend!r} is not one of {', '.join(BACKENDS)}")
    if op.embedded_model not in EMBEDDED_MODELS:
        raise OperatorConfigError(f"embedded model {op.embedded_model!r} is not one of {', '.join(EMBEDDED_MODELS)}")
    if op.backend == "openai" and not op.base_url.strip():
        raise OperatorConfigError("the openai backend needs a server URL (SWIFTSAGE_LLM_BASE_URL or [llm] base_url)")
    return op


# ----------------------------------------------------------------------------- share mode


def _is_loopback(address: str | None) -> bool:
    if address is None or address.strip() in ("", "0.0.0.0", "::"):
        return False  # every interface
    if address.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: assume it is reachable from elsewhere


def _server_address() -> str | None:
    try:
        from streamlit import runtime

        if not runtime.exists():  # AppTest, bare mode: no server, nothing is served
            return "127.0.0.1"
        return st.get_option("server.address")
    except Exception:  # noqa: BLE001 - no readable option: lock, the safe side
        return None


def _visitor_is_remote() -> bool:
    try:
        ip = st.context.ip_address  # None for a browser on this machine (localhost)
    except Exception:  # noqa: BLE001 - outside a script run
        return False
    return isinstance(ip, str) and bool(ip) and not _is_loopback(ip)  # (a test harness may hand a stand-in)


def share_mode() -> bool:
    """Is the app served beyond this machine (a classroom)? Then the operator's settings hold."""
    if os.environ.get("SWIFTSAGE_SHARE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return not _is_loopback(_server_address()) or _visitor_is_remote()


# ----------------------------------------------------------------------------- the teacher passcode

_FAILS: list[float] = []  # times of wrong passcodes, server-wide: guessing is slowed for every browser
_FAILS_LOCK = threading.Lock()
MAX_FAILS, FAIL_WINDOW_S = 20, 60.0  # enough to slow guessing, too many for a student to lock the teacher out by typing


def unlocked() -> bool:
    """May this browser session start agent runs and model calls? Always locally; in share mode only after the
    teacher passcode."""
    return not share_mode() or bool(S.get("share_unlocked"))


def may_ask_model() -> bool:
    """May this session have the model phrase an Ask answer (an LLM call on the operator's machine)?"""
    if unlocked():
        return True
    try:
        return operator().visitors_ask_model
    except OperatorConfigError:
        return False


def try_passcode(typed: str) -> str | None:
    """Check a typed passcode; unlock this session when right. Returns a message for a refusal, None when unlocked."""
    op = operator()
    if not op.passcode:
        return "No teacher passcode was set when the app was started, so the controls stay locked in every browser."
    now = time.monotonic()
    with _FAILS_LOCK:
        _FAILS[:] = [t for t in _FAILS if now - t < FAIL_WINDOW_S]
        if len(_FAILS) >= MAX_FAILS:
            wait = FAIL_WINDOW_S - (now - _FAILS[0])
            return f"Too many wrong passcodes on this server: try again in {wait:.0f} s."
        if hmac.compare_digest(typed.encode(), op.passcode.encode()):
            S["share_unlocked"] = True
            return None
        _FAILS.append(now)
    return "That is not the teacher passcode."


def passcode_box() -> None:
    """Sidebar: in share mode, what is fixed and the teacher's unlock (nothing at all locally)."""
    if not share_mode():
        return
    try:
        op = operator()
    except OperatorConfigError as e:
        st.error(f"The operator's settings cannot be used: {e}")
        return
    with st.expander("🔒 Classroom" if not unlocked() else "🔓 Classroom: teacher controls on",
                     expanded=not unlocked() and bool(S.get("share_msg"))):
        st.caption(f"This app is shared. Fixed by whoever started it: **LLM** {op.llm_label()}; memory stores and "
                   f"traces only under the app's folders.")
        if unlocked():
            st.caption("This browser has the teacher controls (runs, forks, model calls).")
            st.button("Lock this browser again", key="share_lock", on_click=lambda: S.update(share_unlocked=False))
            return
        if not op.passcode:
            st.caption("No teacher passcode was set at launch: watch, follow, replay, compare and ask only.")
            return
        # a form: the typed passcode and the click reach the server together (Enter submits too)
        with st.form("share_unlock_form", clear_on_submit=True, border=False):
            st.text_input("Teacher passcode", type="password", key="share_passcode_typed",
                          help="Unlocks the controls that start runs and model calls, in this browser only.")
            st.form_submit_button("Unlock", key="share_unlock", on_click=_unlock)
        if S.get("share_msg"):
            st.error(S["share_msg"])


def _unlock() -> None:
    S["share_msg"] = try_passcode(str(S.get("share_passcode_typed", "")))


VISITOR_NICE = 10  # how much lower a visitor's redraws run than the teacher's agent (Linux nice, per thread)
_niced = threading.local()  # .was: this thread's priority before a visitor's run lowered it


def _normal_nice() -> int:
    """The server's own priority: its main thread's (on Linux a thread's priority is its own, and a new thread or
    process takes the priority of the thread that starts it)."""
    return os.getpriority(os.PRIO_PROCESS, os.getpid())


@functools.cache
def _reversible() -> bool:
    """Can this server give a lowered thread its priority back? Only root (CAP_SYS_NICE) or a raised RLIMIT_NICE
    may lower a nice value. Tried once on a throwaway thread."""
    out: list[bool] = []

    def probe() -> None:
        try:
            tid, normal = threading.get_native_id(), _normal_nice()
            os.setpriority(os.PRIO_PROCESS, tid, min(19, normal + VISITOR_NICE))
            os.setpriority(os.PRIO_PROCESS, tid, normal)
            out.append(os.getpriority(os.PRIO_PROCESS, tid) == normal)
        except (AttributeError, OSError):  # not Linux, or not allowed
            out.append(False)

    th = threading.Thread(target=probe, name="nice-probe")
    th.start()
    th.join()
    return bool(out) and out[0]


def lower_priority_for_visitors() -> None:
    """In a shared app, a visitor's page is drawn at a lower CPU priority than the teacher's run: thirty followers
    redrawing after each step then take what the agent leaves, instead of slowing its next Swift step or Sage
    call. Called at the start of every script run, on every page. Only this run's thread is lowered; the agent
    steps in a thread of its own.

    Streamlit runs a rerun asked for during a run (the teacher's Unlock click while the page still draws) in the
    same thread, and a thread or process inherits the priority of the thread that starts it: so a thread that is
    now the teacher's gets its priority back here, before it can start a JVM or the agent's step thread. Where
    the priority could not be given back (no CAP_SYS_NICE), no visitor's thread is lowered at all."""
    tid = threading.get_native_id()
    was = getattr(_niced, "was", None)
    if not share_mode() or unlocked():
        if was is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, was)
            except OSError as e:  # _reversible() said it could: say so rather than slow the teacher silently
                log.warning("could not restore the priority of the teacher's thread: %s", e)
            _niced.was = None
        return
    if was is not None:
        return
    try:
        if not _reversible():
            return
        _niced.was = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, _niced.was + VISITOR_NICE))
    except (AttributeError, OSError):  # not Linux, or not allowed: the page is drawn at normal priority
        _niced.was = None


# ----------------------------------------------------------------------------- the LLM a page may use


def page_llm(typed: LLMConfig) -> LLMConfig:
    """The LLM settings a page uses: what the visitor chose locally, the operator's in share mode."""
    if not share_mode():
        return typed
    return operator().llm()


def check_llm(cfg: LLMConfig) -> None:
    """Last guard before a backend is built: in share mode only the operator's server gets the operator's key."""
    if not share_mode() or cfg.backend != "openai":
        return
    op = operator()
    if cfg.base_url.rstrip("/") != op.base_url.rstrip("/") or op.backend != "openai":
        raise PermissionError(f"this shared app sends requests only to the server its operator configured, not to "
                              f"{cfg.base_url!r}")


# ----------------------------------------------------------------------------- stores and traces


class PathRefused(ValueError):
    """A path outside the app's data roots in share mode; nothing was read or created."""


def _memory_roots() -> list[Path]:
    out = [Path(p) for p in (operator_or_default().memory_roots)]
    if os.environ.get("SWIFTSAGE_MEMORY_DIR"):
        out.append(Path(os.environ["SWIFTSAGE_MEMORY_DIR"]))
    return out


def operator_or_default() -> Operator:
    try:
        return operator()
    except OperatorConfigError:
        return Operator()


def writable_roots() -> list[Path]:
    """Where a page may create a memory store: runs/ and the configured memory roots."""
    return [sources.runs_dir(), *_memory_roots()]


def data_roots() -> list[Path]:
    """Where a page may read stores and traces: runs/, evals/, assets/ and the configured memory roots."""
    return [*writable_roots(), sources.evals_dir(), ROOT / "assets", sources.examples_dir(),
            sources.shipped_evals_dir()]


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(sources.inside(path, r) for r in roots)  # symlinks and '..' resolved before the check


def roots_text(roots: list[Path]) -> str:
    return ", ".join(f"`{sources.link_path(r)}`" for r in roots)


def checked_path(text: str | Path, *, what: str, create: bool = False) -> Path:
    """The path a visitor typed (or a trace named), as a Path, relative paths from the project folder. In share
    mode one outside the data roots (or, to create, outside the writable roots) raises PathRefused before
    anything is read or written."""
    p = Path(str(text).strip()).expanduser()
    if not p.is_absolute():
        p = ROOT / p
    if not share_mode():
        return p
    roots = writable_roots() if create else data_roots()
    if not _inside(p, roots):
        verb = "creates" if create else "opens"
        raise PathRefused(f"`{text}` is outside the app's folders. This app is shared, so it {verb} {what} only "
                          f"under {roots_text(roots)}. Nothing was {'created' if create else 'read'}.")
    return p


def may_open(path: str | Path) -> bool:
    """Quietly: may this path be read (for lists and defaults that should skip what would be refused)?"""
    try:
        checked_path(path, what="files")
        return True
    except PathRefused:
        return False


def main() -> int:
    """`python -m views.share --check`: validate the operator's settings before the app starts (exit 2 if bad)."""
    import sys

    try:
        op = operator()
    except OperatorConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"LLM: {op.llm_label()}; teacher passcode: {'set' if op.passcode else 'none'}"
          + (f"; memory roots: {', '.join(op.memory_roots)}" if op.memory_roots else ""))
    print("visitors' pages: " + ("drawn at a lower CPU priority than the teacher's run" if _reversible() else
                                 "drawn at normal priority (lowering them needs root, CAP_SYS_NICE or a raised "
                                 "RLIMIT_NICE, to give a thread that becomes the teacher's its priority back)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
