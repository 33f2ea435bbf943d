"""A small client of Streamlit's websocket protocol: many light "browsers" in one process, for load tests.

Each `Session` connects to `/_stcore/stream` the way the browser does, asks for a script run with a query
string (e.g. `follow=live`), reads the ForwardMsgs (protobuf) and does what the browser does for this app:
it reruns a fragment when the server asked for it (`auto_rerun`, how `st.fragment(run_every=...)` works) and
notes when a step header ("### Step N · ...") first arrives. It draws nothing, so a class of thirty costs
the client a few percent of a core. Everything runs on one asyncio loop (`run_sessions`).

Used by tests/test_classroom.py (5 followers) and benchmarks/classroom_load.py (30 followers + 5 scrubbers).
"""
from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

STEP_HEADER = re.compile(r"^### Step (\d+) · ")


@dataclass
class Session:
    """One browser tab's worth of protocol. `steps_seen[n]` is the wall time (time.time()) the header of step n
    first arrived; `errors` holds exceptions the page showed and protocol failures."""

    url: str  # http://127.0.0.1:PORT
    query: str = ""
    name: str = ""
    steps_seen: dict[int, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    runs_finished: int = 0
    bytes_in: int = 0
    page_hash: str = ""
    # what the page drew: every markdown, alert, caption, button, radio and expander text, in order (probe tests)
    texts: list[str] = field(default_factory=list)
    page: str = ""  # a page's URL path to open (e.g. "compare"); "" = the default page
    host: str = ""  # the name to ask for (Host header); the connection still goes to the URL's address
    headers: dict[str, str] = field(default_factory=dict)  # more request headers (e.g. an Origin)
    widgets: dict[str, str] = field(default_factory=dict)  # a button's or text field's label -> its widget id
    _ws: object = None
    _fragments: dict[str, asyncio.Task] = field(default_factory=dict)
    connected: asyncio.Event = field(default_factory=asyncio.Event)

    async def send_rerun(self, query: str | None = None, fragment_id: str = "", widget_states=None) -> bool:
        """Ask for a script run (a fragment's, with its id), with these widget values (a list of WidgetState: what a
        browser sends, or a crafted message); False when the connection is gone."""
        from streamlit.proto.WidgetStates_pb2 import WidgetStates
        from websockets.exceptions import ConnectionClosed

        if query is not None:
            self.query = query
        msg = BackMsg(rerun_script=ClientState(query_string=self.query, page_script_hash=self.page_hash,
                                               fragment_id=fragment_id, is_auto_rerun=bool(fragment_id),
                                               page_name=self.page if not self.page_hash else "",
                                               widget_states=WidgetStates(widgets=widget_states or [])))
        try:
            await self._ws.send(msg.SerializeToString())
            return True
        except ConnectionClosed:
            return False

    async def _auto_rerun(self, fragment_id: str, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            if not await self.send_rerun(fragment_id=fragment_id):
                return

    def _take(self, raw: bytes) -> None:
        self.bytes_in += len(raw)
        msg = ForwardMsg()
        msg.ParseFromString(raw)
        kind = msg.WhichOneof("type")
        if kind == "new_session":
            self.page_hash = self.page_hash or msg.new_session.page_script_hash
            if not msg.metadata.run.fragment_ids:  # a full run starts: the browser drops the old fragment timers
                for task in self._fragments.values():
                    task.cancel()
                self._fragments.clear()
        elif kind == "navigation":
            self.page_hash = msg.navigation.page_script_hash or self.page_hash
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            which = el.WhichOneof("type")
            if which == "markdown":
                self.texts.append(el.markdown.body)
                m = STEP_HEADER.match(el.markdown.body)
                if m:
                    self.steps_seen.setdefault(int(m.group(1)), time.time())
            elif which == "exception":
                self.texts.append(f"{el.exception.type}: {el.exception.message}\n" + "\n".join(el.exception.stack_trace))
                self.errors.append(f"{self.name}: page exception {el.exception.type}: {el.exception.message[:200]}")
            elif which == "alert":
                self.texts.append(el.alert.body)
            elif which in ("button", "radio", "selectbox", "text_input"):
                w = getattr(el, which)
                self.texts.append(" | ".join([w.label, *getattr(w, "options", [])]))
                self.widgets[w.label] = w.id
        elif kind == "delta" and msg.delta.WhichOneof("type") == "add_block":
            block = msg.delta.add_block
            if block.WhichOneof("type") == "expandable":
                self.texts.append(block.expandable.label)
        elif kind == "auto_rerun":
            fid, every = msg.auto_rerun.fragment_id, msg.auto_rerun.interval
            if fid not in self._fragments:
                self._fragments[fid] = asyncio.get_running_loop().create_task(self._auto_rerun(fid, every))
        elif kind == "stop_auto_rerun":
            task = self._fragments.pop(msg.stop_auto_rerun.fragment_id, None)
            if task:
                task.cancel()
        elif kind == "script_finished":
            self.runs_finished += 1

    async def run(self, stop: asyncio.Event) -> None:
        from websockets.asyncio.client import connect

        ws_url = self.url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        extra = {}
        if self.host:  # ask for another name, connect to the same address (a DNS answer pointing here)
            address = ws_url.split("//", 1)[1].split("/", 1)[0]
            name, port = address.rsplit(":", 1)
            ws_url = ws_url.replace(address, f"{self.host}:{port}", 1)
            extra = {"host": name, "port": int(port)}
        try:
            async with connect(ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=60,
                               ping_interval=None, additional_headers=self.headers or None, **extra) as ws:
                self._ws = ws
                await self.send_rerun()
                self.connected.set()
                while not stop.is_set():
                    try:
                        raw = await asyncio.wait_for(ws.recv(), timeout=0.5)
                    except TimeoutError:
                        continue
                    self._take(raw)
        except Exception as e:  # noqa: BLE001 - a dropped connection is a result, not a crash of the harness
            if not stop.is_set():
                self.errors.append(f"{self.name}: {type(e).__name__}: {e}")
        finally:
            for task in self._fragments.values():
                task.cancel()
            self.connected.set()


async def run_sessions(sessions: list[Session], stop: asyncio.Event, stagger_s: float = 0.1) -> None:
    """Connect the sessions one after another (a class does not arrive in the same millisecond), keep them until
    `stop` is set."""
    tasks = []
    for s in sessions:
        tasks.append(asyncio.create_task(s.run(stop)))
        await asyncio.sleep(stagger_s)
    await asyncio.gather(*tasks)
