"""Start real OpenAI-compatible servers on 127.0.0.1 for tests: llama.cpp's server with the small
packaged model, and a tiny misbehaving one for malformed replies."""
from __future__ import annotations

import http.server

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """`python -m llama_cpp.server` serving SmolLM2-135M from the package cache."""

    def __init__(self, model_key: str = "smollm2-135m", alias: str = "smollm2"):
        from agent_core.llm.embedded import model_path

        self.port = free_port()
        self.alias = alias
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(model_key)), "--model_alias",
             alias, "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", "2048", "--n_threads", "1",
             "--verbose", "False"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.time() + 90
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited: {self.proc.stderr.read().decode()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("llama.cpp server did not come up within 90 s")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


class BadServer:
    """Answers /v1/chat/completions with whatever `mode` says: empty, nochoices, notjson, http500, http404, slow
    (a real answer after `delay` seconds), garbage (a reply of symbols and control characters), reply (the text in
    `reply`, at once)."""

    def __init__(self):
        self.mode = "empty"
        self.delay = 30.0
        self.reply = ""  # what mode "reply" answers
        self.auth: list[str] = []  # the Authorization header of every request (tests check the key was sent)
        self.bodies: list[dict] = []  # every request's JSON body (tests check what the agent sent)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json"):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(200, json.dumps({"object": "list", "data": [{"id": "bad", "object": "model"}]}).encode())

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                try:
                    outer.bodies.append(json.loads(raw or b"{}"))
                except ValueError:
                    outer.bodies.append({})
                outer.auth.append(self.headers.get("Authorization", ""))
                m = outer.mode
                base = {"id": "x", "object": "chat.completion", "created": 0, "model": "bad"}
                if m == "empty":
                    self._send(200, json.dumps({**base, "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": ""}}]}).encode())
                elif m == "nochoices":
                    self._send(200, json.dumps({**base, "choices": []}).encode())
                elif m == "notjson":
                    self._send(200, b"<html>proxy error</html>", "text/html")
                elif m == "http500":
                    self._send(500, b'{"error": "model crashed"}')
                elif m == "http404":
                    self._send(404, b'{"error": "no such model"}')
                elif m in ("slow", "garbage", "reply"):
                    if m == "slow":  # answers, but only after `delay` seconds (a model server under load)
                        time.sleep(outer.delay)
                    text = {"slow": "Q1: the pot. Q2: water. Q3: fill it. Q4: go to the kitchen. Q5: no mistake.\n1",
                            "garbage": "\u2603\u2603 %%%% <unk><unk> \x07 ;;;; 0x7f \ufffd\ufffd",
                            "reply": outer.reply}[m]
                    try:
                        self._send(200, json.dumps({**base, "choices": [{"index": 0, "finish_reason": "stop",
                                                    "message": {"role": "assistant", "content": text}}]}).encode())
                    except OSError:  # the client gave up (timeout, Pause) and closed the connection
                        pass

        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class Listener:
    """An attacker's server on 127.0.0.1: counts every request it gets."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):  # noqa: N802
                outer.requests.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"{}")

            do_POST = do_GET  # noqa: N815

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
