"""Share mode: a classroom served from one machine is locked to what its operator chose.

The app is unlocked (its operator at the keyboard) only for a request that is provably local: a loopback peer, a
loopback Host, no Origin from elsewhere and no forwarding header, on an app bound to loopback. Anything else is a
visitor, whatever the bind address: a same-host proxy or tunnel (nginx, `ssh -R`, a tunnelling service) makes every
visitor arrive from 127.0.0.1, and such a request still carries the name the visitor typed (Host or Origin) or the
proxy's forwarding headers. A request for a host name the app does not serve is refused outright (DNS rebinding:
a page elsewhere whose name resolves to this machine). Served beyond loopback (`scripts/app.sh --share`,
`SWIFTSAGE_SHARE=1`, a non-loopback `server.address`) every request is a visitor's. For a visitor, the app is in
**share mode**:

- the LLM (backend, embedded model, server URL, model name, API key, CPU threads, timeout) comes from the operator
  (environment, or the TOML file named by `SWIFTSAGE_APP_CONFIG`) and is shown read-only; a page never builds a
  backend from what a visitor typed, so the operator's key only ever goes to the server URL the operator set;
- stores and traces open only under the app's data roots (runs/, evals/, assets/, the configured memory roots),
  and stores are created only under the writable ones (runs/ and the memory roots); anything else is refused
  with a message, before it is read or created;
- a browser starts agent runs or model calls only after the teacher passcode (`SWIFTSAGE_PASSCODE`, at least
  MIN_PASSCODE characters) was typed in it, for `unlock_minutes`; wrong passcodes slow down the browser and the
  address that typed them (views/visitor_limits.py), never anyone else; without it a visitor watches, follows the
  teacher's run live, replays, compares and asks (the memories that answer a question are retrieved; the model
  phrases the answer only where the operator allows it, within per-browser and per-hour limits, one at a time).
"""
from __future__ import annotations

import dataclasses
import functools
import hmac
import ipaddress
import logging
import os
import secrets
import threading
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from agent_core.config import LLMConfig
from agent_core.llm.embedded import MODELS as EMBEDDED_MODELS
from views import sources
from views.visitor_limits import ModelQueue, PasscodeGuard

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
    unlock_minutes: float = 480.0  # how long a teacher unlock lasts in a browser (0 = until the browser is closed)
    visitor_calls_per_browser: int = 5  # visitors' model calls per browser per hour
    visitor_calls_per_hour: int = 60  # visitors' model calls per hour, all browsers together
    visitor_queue: int = 8  # visitors' model calls waiting at once (one runs at a time)

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
    "SWIFTSAGE_UNLOCK_MINUTES": "unlock_minutes",
    "SWIFTSAGE_VISITOR_CALLS_PER_BROWSER": "visitor_calls_per_browser",
    "SWIFTSAGE_VISITOR_CALLS_PER_HOUR": "visitor_calls_per_hour", "SWIFTSAGE_VISITOR_QUEUE": "visitor_queue",
}
_FILE_KEYS = {"llm": ("backend", "embedded_model", "base_url", "model", "n_threads", "timeout_s"),
              "class": ("passcode", "memory_roots", "visitors_ask_model", "unlock_minutes",
                        "visitor_calls_per_browser", "visitor_calls_per_hour", "visitor_queue")}
MIN_PASSCODE = 10  # characters: with the per-browser and per-address limits, guessing one takes centuries


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
            return tuple(str(v).strip() for v in items if str(v).strip())
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
    if op.passcode and len(op.passcode) < MIN_PASSCODE:
        raise OperatorConfigError(f"the teacher passcode has {len(op.passcode)} characters; use at least "
                                  f"{MIN_PASSCODE} (`scripts/app.sh --share --passcode` makes one)")
    for name in ("unlock_minutes", "visitor_calls_per_browser", "visitor_calls_per_hour", "visitor_queue"):
        if getattr(op, name) < 0:
            raise OperatorConfigError(f"{name} must not be negative (got {getattr(op, name)})")
    return op


# ----------------------------------------------------------------------------- who is asking


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# headers a proxy adds: their presence means the request came through one, so it is not provably local
FORWARDING_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-forwarded-port",
                      "x-forwarded-server", "x-real-ip", "x-client-ip", "x-cluster-client-ip", "true-client-ip",
                      "cf-connecting-ip", "fastly-client-ip", "x-original-forwarded-for", "via")


def _is_loopback(address: str | None) -> bool:
    if address is None or address.strip() in ("", "0.0.0.0", "::"):
        return False  # every interface
    a = address.strip().strip("[]").lower()
    if a == "localhost" or a.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(a).is_loopback
    except ValueError:
        return False  # a host name: assume it is reachable from elsewhere


def host_name(value: str | None) -> str:
    """The name in a Host header or an Origin URL, lower case, without port or brackets ('' when absent)."""
    v = (value or "").strip().lower()
    if "://" in v:
        v = v.split("://", 1)[1]
    v = v.split("/", 1)[0].rsplit("@", 1)[-1]
    if v.startswith("["):
        return v[1:v.index("]")] if "]" in v else v[1:]
    return v.rsplit(":", 1)[0] if v.count(":") == 1 else v


@dataclass(frozen=True)
class Request:
    """What the server knows of the browser that asks: its peer address (None = loopback) and its headers (lower-case
    names)."""

    peer: str | None = None
    headers: tuple[tuple[str, str], ...] = ()

    def header(self, name: str) -> str | None:
        return next((v for k, v in self.headers if k == name), None)

    def is_local(self) -> bool:
        """Provably the machine's own browser: loopback peer and Host, no Origin from elsewhere, no proxy header."""
        if self.peer is not None and not _is_loopback(self.peer):
            return False
        if not _is_loopback(host_name(self.header("host")) or "127.0.0.1"):
            return False
        origin = self.header("origin")
        if origin and origin != "null" and not _is_loopback(host_name(origin)):
            return False
        return not any(self.header(h) is not None for h in FORWARDING_HEADERS)

    def address(self) -> str:
        """The client address that wrong passcodes are counted against: the peer's; behind a proxy on this machine
        (a loopback peer with X-Forwarded-For), the last address that proxy appended."""
        xff = self.header("x-forwarded-for")
        if (self.peer is None or _is_loopback(self.peer)) and xff:
            return xff.split(",")[-1].strip() or "local"
        return self.peer or "local"


def current_request() -> Request:
    """This script run's request. Outside a server (AppTest, bare mode) nothing is served: a local request, unless
    a test hands a stand-in (SWIFTSAGE_TEST_REQUEST, see tests)."""
    try:
        from streamlit import runtime

        if not runtime.exists():
            return Request()
        headers = tuple((k.lower(), v) for k, v in st.context.headers.items())
        ip = st.context.ip_address  # None for a loopback peer (Streamlit hides 127.0.0.1 and ::1)
    except Exception:  # noqa: BLE001 - outside a script run: nobody asks
        return Request()
    return Request(peer=ip if isinstance(ip, str) and ip else None, headers=headers)


def _server_address() -> str | None:
    try:
        from streamlit import runtime

        if not runtime.exists():  # AppTest, bare mode: no server, nothing is served
            return "127.0.0.1"
        return st.get_option("server.address")
    except Exception:  # noqa: BLE001 - no readable option: lock, the safe side
        return None


def app_shared() -> bool:
    """Was the app started for a class (`SWIFTSAGE_SHARE`, or bound beyond loopback)?"""
    if os.environ.get("SWIFTSAGE_SHARE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    return not _is_loopback(_server_address())


def share_mode() -> bool:
    """Is this request a visitor's (a classroom)? Then the operator's settings hold. Only a provably local request
    to an app started locally is the operator's."""
    return app_shared() or not current_request().is_local()


def allowed_hosts() -> list[str]:
    """Streamlit's `server.allowedHosts`: the names its server accepts a page's connection for (scripts/app.sh
    --share sets this machine's addresses and names, and --host adds more; empty or '*' = any)."""
    try:
        return [str(h) for h in (st.get_option("server.allowedHosts") or [])]
    except Exception:  # noqa: BLE001 - no such option: no list
        return []


def served_host(req: Request) -> bool:
    """Is the name this request asked for one the app serves? Loopback names always; other names only when the app
    was started for a class (a local app never answers to a name from elsewhere: DNS rebinding, or a proxy that
    passes on the visitor's name), and there only those in `server.allowedHosts` when it lists any. Streamlit's
    server refuses a page's connection for a name outside that list already; this also holds where it lists none."""
    name = host_name(req.header("host"))
    if not name or _is_loopback(name):
        return True
    if not app_shared():
        return False
    hosts = {host_name(h) for h in allowed_hosts()}
    return not hosts or "*" in hosts or name in hosts or any(h.startswith("*.") and name.endswith(h[1:])
                                                              for h in hosts)


def refuse_unserved_host() -> None:
    """Called before every page: a request for a host name the app does not serve gets one line and nothing else."""
    req = current_request()
    if served_host(req):
        return
    st.error(f"This app is not served under the name {host_name(req.header('host'))!r}. Open it with the address "
             f"its operator gave you.")
    st.stop()


# ----------------------------------------------------------------------------- the teacher passcode

GUARD = PasscodeGuard()  # one per server: counts per browser session and per client address, never server-wide


def session_key() -> str:
    """This browser session's own random id (kept in its session state): what its passcode tries and model calls are
    counted against."""
    return S.setdefault("share_session_key", secrets.token_hex(8))


_queues: dict[tuple[int, int, int], ModelQueue] = {}
_queues_lock = threading.Lock()


def visitor_queue() -> ModelQueue:
    """The server's one line for visitors' model calls, with the operator's limits (a changed setting starts a new
    line, as a restarted server would)."""
    op = operator_or_default()
    key = (op.visitor_calls_per_browser, op.visitor_calls_per_hour, op.visitor_queue)
    with _queues_lock:
        if key not in _queues:
            _queues[key] = ModelQueue(per_session=key[0], per_hour=key[1], max_waiting=key[2])
        return _queues[key]


def unlocked() -> bool:
    """May this browser session start agent runs and model calls? Always locally; in share mode only after the
    teacher passcode, for the operator's `unlock_minutes`."""
    if not share_mode():
        return True
    at = S.get("share_unlocked")
    if not at:
        return False
    minutes = operator_or_default().unlock_minutes
    if minutes and at is not True and time.monotonic() - float(at) > minutes * 60:
        S["share_unlocked"] = False
        S["share_msg"] = (f"The teacher unlock of this browser ended after {minutes:g} min: type the passcode again.")
        return False
    return True


def may_ask_model() -> bool:
    """May this session have the model phrase an Ask answer (an LLM call on the operator's machine)?"""
    if unlocked():
        return True
    try:
        return operator().visitors_ask_model
    except OperatorConfigError:
        return False


def try_passcode(typed: str, session: str | None = None, address: str | None = None) -> str | None:
    """Check a typed passcode; unlock this session when right. Returns a message for a refusal, None when unlocked.
    A session or address that must wait is told so before its passcode is compared. Never logs what was typed."""
    op = operator()
    if not op.passcode:
        return "No teacher passcode was set when the app was started, so the controls stay locked in every browser."
    session = session or session_key()
    address = address or current_request().address()
    wait = GUARD.wait_s(session, address)
    if wait > 0:
        return f"Too many wrong passcodes from this browser or this address: try again in {wait:.0f} s."
    if hmac.compare_digest(typed.encode(), op.passcode.encode()):
        GUARD.succeeded(session)
        S["share_unlocked"] = time.monotonic()
        log.info("teacher controls unlocked in a browser from %s", address)
        return None
    GUARD.failed(session, address)
    log.warning("a wrong teacher passcode from %s", address)
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
            st.caption("This browser has the teacher controls (runs, forks, model calls)"
                       + (f" for {op.unlock_minutes:g} min from the unlock." if op.unlock_minutes else "."))
            st.button("Lock this browser again", key="share_lock", on_click=lambda: S.update(share_unlocked=False))
            return
        if not op.passcode:
            st.caption("No teacher passcode was set at launch: watch, follow, replay, compare and ask only.")
            return
        # a form: the typed passcode and the click reach the server together (Enter submits too)
        with st.form("share_unlock_form", clear_on_submit=True, border=False):
            st.text_input("Teacher passcode", type="password", key="share_passcode_typed", max_chars=200,
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
          + (f" (an unlock lasts {op.unlock_minutes:g} min)" if op.passcode and op.unlock_minutes else "")
          + (f"; memory roots: {', '.join(op.memory_roots)}" if op.memory_roots else ""))
    print(f"visitors' model calls: " + (f"at most {op.visitor_calls_per_browser} per browser and "
                                        f"{op.visitor_calls_per_hour} in all per hour, one at a time, "
                                        f"{op.visitor_queue} waiting at most" if op.visitors_ask_model else "none"))
    print("visitors' pages: " + ("drawn at a lower CPU priority than the teacher's run" if _reversible() else
                                 "drawn at normal priority (lowering them needs root, CAP_SYS_NICE or a raised "
                                 "RLIMIT_NICE, to give a thread that becomes the teacher's its priority back)"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
