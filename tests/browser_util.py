"""Helpers for end-to-end tests: serve the app with `streamlit run` and drive Debian's Chromium with
Playwright (never a browser downloaded by `playwright install`).

Also usable by hand, e.g. to refresh the screenshot in the docs:
    .venv/bin/python -m tests.browser_util --steps 4 --out docs/img/run_page.png
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path(os.environ.get("SWIFTSAGE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVERS: dict[str, int] = {}  # url -> the served app's process id (its process group has the same id)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_http(url: str, proc: subprocess.Popen, log_path: Path, timeout_s: float, what: str,
                  expect: str = "") -> None:
    """Poll `url` until it answers 200 (and its body contains `expect`); fail with the log's tail if the
    process exits or the time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}; log:\n{Path(log_path).read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200 and (not expect or expect in r.read().decode(errors="replace")):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not answer within {timeout_s:g} s; log:\n"
                               f"{Path(log_path).read_text()[-3000:]}")
        time.sleep(0.5)


@contextlib.contextmanager
def served_app(runs_dir: Path, log_path: Path, env: dict[str, str] | None = None,
               start_timeout: float = 90.0) -> Iterator[str]:
    """`streamlit run app.py` on a free port in its own process group; yields the URL and stops the
    server (and the ScienceWorld JVMs it started) on exit."""
    port = free_port()
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
                "SWIFTSAGE_RUNS_DIR": str(runs_dir), **(env or {})}
    cmd = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
           str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/_stcore/health", proc, log_path, start_timeout, "streamlit")
        SERVERS[url] = proc.pid
        yield url
    finally:
        SERVERS.pop(url, None)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # the JVMs share the group; make sure they are gone
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@contextlib.contextmanager
def chromium_page(width: int = 1500, height: int = 1100):
    """A Playwright page in Debian's headless Chromium."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            context = browser.new_context(viewport={"width": width, "height": height})
            yield context.new_page()  # context.new_page() opens another tab (another Streamlit session)
        finally:
            browser.close()


def open_live(page) -> None:
    """The Run page opens on the first-visit example (a recorded episode): switch the source to a live run."""
    page.get_by_test_id("stSidebar").get_by_text("Live run", exact=True).click(timeout=60_000)
    page.get_by_role("button", name="Reset", exact=True).wait_for(timeout=60_000)


def unlock_live_run(page, url: str, passcode: str) -> None:
    """In a shared (locked) app: type the teacher passcode in the sidebar's Classroom box, then open the live run."""
    page.goto(url)
    side = page.get_by_test_id("stSidebar")
    side.get_by_text("Classroom").first.wait_for(timeout=120_000)
    wait_idle(page, 120)  # the first draw done: a form clicked while its page still draws can lose the click
    side.get_by_text("Classroom").first.click()
    pw = page.get_by_test_id("stTextInputField").and_(page.get_by_label("Teacher passcode"))
    unlocked = side.get_by_text("Classroom: teacher controls on")
    for attempt in range(2):
        pw.fill(passcode)
        click_button(page, "Unlock")  # a form: the passcode goes with the click
        try:
            unlocked.wait_for(timeout=60_000 if attempt == 0 else 180_000)
            break
        except Exception as e:  # noqa: BLE001
            wait_idle(page, 180)  # a slow redraw of an Unlock that did arrive: let it finish before judging
            text = side.inner_text()
            if unlocked.count():
                break
            if attempt == 1 or "not the teacher passcode" in text or "Too many" in text or not pw.count():
                # say what the sidebar shows (a refusal, a page still drawing) rather than only "timeout"
                raise AssertionError(f"the passcode did not unlock the page; the sidebar reads:\n{text}") from e
            # still locked, no refusal, the box still there: the click never reached the app (2 of 8 runs, when it
            # was made during the page's first draw); type and click again
            print("unlock_live_run: still locked after Unlock, no refusal shown: typing and clicking again")
    # the unlocked run draws "Live run"; under a loaded CI (two workers, JVMs, models) it once took over 60 s
    side.get_by_text("Live run", exact=True).click(timeout=180_000)
    page.get_by_role("button", name="Reset", exact=True).wait_for(timeout=60_000)


def group_nices(url: str, comm: str) -> list[int]:
    """The nice values of the served app's processes named `comm` (e.g. the ScienceWorld JVMs, `java`)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:  # gone meanwhile
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:].split()
        if name == comm and int(rest[2]) == SERVERS[url]:  # rest: state, ppid, pgrp, ... nice is field 19 of stat
            out.append(int(rest[16]))
    return out


def click_button(page, name: str) -> None:
    page.get_by_role("button", name=name, exact=True).click()


def wait_for_step(page, n: int, timeout_s: float) -> str:
    """Wait until the page's header says 'Step n ·'; returns the header text."""
    # one JS poll (not locator.wait_for + inner_text): a running episode re-renders the header in between
    handle = page.wait_for_function(
        "(prefix) => { const h = [...document.querySelectorAll('h3')].find(e => e.innerText.startsWith(prefix));"
        " return h ? h.innerText : null; }", arg=f"Step {n} ·", timeout=timeout_s * 1000)
    return handle.json_value()


def header_step(page) -> int | None:
    """The step the page's header shows now ('Step n · ...'), or None before it is drawn."""
    text = page.evaluate("() => { const h = [...document.querySelectorAll('h3')].find(e => e.innerText.startsWith("
                         "'Step ')); return h ? h.innerText : null; }")
    try:
        return int(text.split()[1]) if text else None
    except (IndexError, ValueError):
        return None


def press_for_step(page, key: str, n: int, timeout_s: float = 60) -> None:
    """Press a shortcut key and wait until the header says 'Step n ·'. CI once lost a key pressed on an idle page
    (no script run followed, the header stayed at the old step for 60 s; 0 of 24 presses lost here, idle or with
    the CPUs busy): when the page is idle, not running, and still on another step after 15 s, the key never reached
    the app, so it is pressed once more (and said). A slow run that did get the key shows Streamlit's running icon
    meanwhile and is only waited for."""
    page.keyboard.press(key)
    try:
        wait_for_step(page, n, min(15, timeout_s))
        return
    except Exception:  # noqa: BLE001 - judged below
        pass
    wait_idle(page, timeout_s)
    now = header_step(page)
    if now == n:
        return
    active = page.evaluate("() => document.activeElement ? document.activeElement.tagName : null")
    said = f"press_for_step: {key} left the page idle at step {now} (focus on {active}), not {n}: pressing again"
    print(said)
    (ROOT / "tests" / "artifacts").mkdir(parents=True, exist_ok=True)  # a record: are keys lost under load?
    with open(ROOT / "tests" / "artifacts" / "press_for_step.log", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {said}\n")
    page.keyboard.press(key)
    try:
        wait_for_step(page, n, timeout_s)
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{key} twice did not reach step {n}: the header says step {header_step(page)}, "
                             f"focus on {active}") from e


def wait_idle(page, timeout_s: float = 60) -> None:
    """Wait until Streamlit has finished the script run (its header shows a running icon meanwhile)."""
    page.wait_for_timeout(300)
    page.wait_for_function("() => !document.querySelector('[data-testid^=\"stStatusWidgetRunning\"]')",
                           timeout=timeout_s * 1000)
    page.wait_for_timeout(300)


def set_number(page, label: str, value: float) -> None:
    """Type into a sidebar number input (opening the 'Advanced' expander first if it hides it)."""
    field = page.get_by_role("spinbutton", name=label)
    if not field.is_visible():
        page.get_by_test_id("stSidebar").get_by_text("Advanced", exact=True).click()
    field.fill(str(value))
    field.press("Enter")
    wait_idle(page)


def screenshot_full(page, path: str | Path) -> None:
    """The whole page: Streamlit scrolls inside its main section, so grow the viewport to its height first."""
    height = page.evaluate("() => Math.max(...[...document.querySelectorAll('[data-testid=stMain], "
                           "[data-testid=stAppScrollToBottomContainer], section')].map(e => e.scrollHeight), "
                           "document.body.scrollHeight)")
    size = page.viewport_size or {"width": 1500, "height": 1100}
    page.set_viewport_size({"width": size["width"], "height": min(max(int(height) + 40, size["height"]), 12000)})
    page.wait_for_timeout(800)  # charts re-layout at the new size
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size(size)


def main() -> None:  # pragma: no cover - a manual helper
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description="Screenshot the Run page after a few steps")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--out", default="tests/artifacts/run_page_manual.png")
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=0, help="LLM CPU threads (0: leave the page's setting, auto)")
    ap.add_argument("--timeout", type=int, default=0, help="Sage call timeout in s (0: the config default)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with served_app(Path(tmp) / "runs", Path(tmp) / "server.log",
                        env={"SWIFTSAGE_DEFAULT_EMBEDDED_MODEL": args.model}) as url, chromium_page() as page:
            page.goto(url)
            page.get_by_role("button", name="Reset", exact=True).wait_for(timeout=60_000)
            if args.threads:
                set_number(page, "LLM CPU threads (embedded; 0 = auto)", args.threads)
            if args.timeout:
                set_number(page, "Sage call timeout (s)", args.timeout)
            click_button(page, "Reset")
            wait_for_step(page, 0, 180)
            for i in range(1, args.steps + 1):
                t0 = time.monotonic()
                click_button(page, "Step")
                wait_for_step(page, i, 900)
                wait_idle(page, 120)
                print(f"step {i}: {time.monotonic() - t0:.0f} s", flush=True)
            time.sleep(2)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            screenshot_full(page, args.out)
            print(f"wrote {args.out}")


if __name__ == "__main__":
    main()


def nginx_binary() -> str:
    """Debian's nginx: on the PATH, or unpacked by `scripts/setup.sh --tests` into the cache (never installed as a
    service)."""
    import shutil

    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    cached = Path(os.environ.get("SWIFTSAGE_NGINX_DIR") or Path.home() / ".cache" / "swiftsage" / "nginx")
    found = found or (str(cached / "usr" / "sbin" / "nginx") if (cached / "usr" / "sbin" / "nginx").exists() else None)
    if not found:
        raise RuntimeError("no nginx: run `bash scripts/setup.sh --tests`, which unpacks Debian's into the cache")
    return found


# two ways a proxy on the same machine passes a browser on to the app:
# - "forwarding": the setup most guides give for Streamlit (the visitor's Host kept, X-Forwarded-For added);
# - "plain": nginx's defaults (Host rewritten to the app's own 127.0.0.1:PORT, no forwarding header) - only the
#   browser's Origin still names where the visitor came from.
NGINX_SERVER = {
    "forwarding": "proxy_set_header Host $http_host; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; "
                  "proxy_set_header X-Forwarded-Proto $scheme;",
    "plain": "",
}


@contextlib.contextmanager
def nginx_proxy(app_url: str, work: Path) -> Iterator[dict[str, str]]:
    """A real nginx on 127.0.0.1 in front of a served app, one server per NGINX_SERVER mode; yields mode -> URL."""
    work.mkdir(parents=True, exist_ok=True)
    upstream = app_url.split("//", 1)[1]
    ports = {mode: free_port() for mode in NGINX_SERVER}
    servers = "\n".join(
        f"server {{ listen 127.0.0.1:{ports[m]}; location / {{ proxy_pass http://{upstream}; proxy_http_version 1.1; "
        f"proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $connection_upgrade; "
        f"proxy_read_timeout 3600s; {extra} }} }}" for m, extra in NGINX_SERVER.items())
    conf = work / "nginx.conf"
    conf.write_text(f"""daemon off; master_process off; worker_processes 1; pid {work}/nginx.pid;
error_log {work}/error.log info;
events {{ worker_connections 256; }}
http {{
  access_log {work}/access.log;
  client_body_temp_path {work}/body; proxy_temp_path {work}/proxy; fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi; scgi_temp_path {work}/scgi;
  map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
  {servers}
}}
""")
    proc = subprocess.Popen([nginx_binary(), "-p", str(work), "-c", str(conf), "-e", str(work / "error.log")],
                            stdout=open(work / "stdout.log", "w"), stderr=subprocess.STDOUT, start_new_session=True)
    urls = {m: f"http://127.0.0.1:{p}" for m, p in ports.items()}
    try:
        for m, u in urls.items():
            wait_for_http(f"{u}/_stcore/health", proc, work / "error.log", 30, f"nginx ({m})")
        yield urls
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
