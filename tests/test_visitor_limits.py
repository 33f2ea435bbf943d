"""Who is a visitor, and what a visitor can make the server do: provable locality, served host names, passcode
lockout per browser and per address, the unlock's expiry, the visitors' model line. No server, no model: the
bookkeeping with a hand-driven clock, and the real passcode box in AppTest sessions."""
from __future__ import annotations

import logging

import pytest
from streamlit.testing.v1 import AppTest

from views import share
from views.share import Request
from views.visitor_limits import ModelQueue, PasscodeGuard, QueueRefused

PASS = "owl-42-teal-long"


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def req(host: str | None = "127.0.0.1:8501", peer: str | None = None, **headers: str) -> Request:
    h = ([("host", host)] if host is not None else []) + [(k.replace("_", "-").lower(), v) for k, v in headers.items()]
    return Request(peer=peer, headers=tuple(h))


@pytest.mark.parametrize("request_, local", [
    (req(), True),
    (req("localhost:8501"), True),
    (req("[::1]:8501"), True),
    (req(None), True),  # no Host at all (HTTP/1.0 from this machine)
    (req(origin="http://localhost:8501"), True),
    (req(peer="10.0.0.7"), False),  # another machine
    (req("classroom.example:8080"), False),  # a tunnel (ssh -R) keeps the name the visitor typed
    (req("127.0.0.1.nip.io:8501"), False),  # a name that resolves to loopback is still a name
    (req(origin="http://classroom.example"), False),  # nginx's default proxy_pass rewrites Host, not Origin
    (req(x_forwarded_for="10.0.0.7"), False),  # nginx, a tunnelling service
    (req(forwarded="for=10.0.0.7"), False),
    (req(x_real_ip="10.0.0.7"), False),
    (req(via="1.1 proxy"), False),
    (req(cf_connecting_ip="203.0.113.9"), False),
])
def test_only_a_provably_local_request_is_the_operators(request_, local):
    assert request_.is_local() is local


def test_a_proxied_request_puts_a_loopback_app_in_share_mode(monkeypatch):
    monkeypatch.delenv("SWIFTSAGE_SHARE", raising=False)
    monkeypatch.setattr(share, "_server_address", lambda: "127.0.0.1")
    monkeypatch.setattr(share, "current_request", lambda: req())
    assert not share.share_mode()
    monkeypatch.setattr(share, "current_request", lambda: req(x_forwarded_for="10.0.0.7"))
    assert share.share_mode()
    monkeypatch.setattr(share, "current_request", lambda: req())  # bound beyond loopback: every request a visitor
    monkeypatch.setattr(share, "_server_address", lambda: "0.0.0.0")
    assert share.share_mode()


def test_a_name_the_app_does_not_serve_is_refused(monkeypatch):
    monkeypatch.delenv("SWIFTSAGE_SHARE", raising=False)
    monkeypatch.setattr(share, "_server_address", lambda: "127.0.0.1")
    rebound = req("attacker.example:8501")  # DNS rebinding: the attacker's name, resolved to 127.0.0.1
    monkeypatch.setattr(share, "current_request", lambda: rebound)
    assert not share.served_host(rebound)  # a local app answers to loopback names only
    assert share.served_host(req("localhost:8501"))
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    monkeypatch.setattr(share, "allowed_hosts", lambda: [])
    assert share.served_host(rebound)  # shared, no names listed: any name (every request is a visitor's anyway)
    monkeypatch.setattr(share, "allowed_hosts", lambda: ["class.example.org", "10.0.0.5", "*.school.example"])
    assert not share.served_host(rebound) and share.served_host(req("room4.school.example"))
    assert share.served_host(req("class.example.org:8501")) and share.served_host(req("10.0.0.5:8501"))
    assert share.served_host(req("127.0.0.1:8501"))


def test_passcode_attempts_are_counted_per_browser_and_per_address():
    clock = Clock()
    g = PasscodeGuard(clock)
    for _ in range(20):  # one student, one browser, twenty wrong passcodes within a minute
        if g.wait_s("student", "10.0.0.7") == 0:
            g.failed("student", "10.0.0.7")
        clock.t += 3
    assert g.wait_s("student", "10.0.0.7") > 0  # that browser waits...
    assert g.wait_s("teacher", "10.0.0.2") == 0  # ...the teacher's browser on another machine does not
    assert g.wait_s("teacher", "10.0.0.7") == 0  # nor one beside the student's (the backoff keeps them under 30)
    clock.t += 600
    assert g.session_wait_s("student") == 0  # the backoff ends (at most 5 min)
    # a script that opens a new session for every guess is held by its address
    for i in range(PasscodeGuard.ADDRESS_FAILS):
        assert g.wait_s(f"bot{i}", "10.0.0.66") == 0
        g.failed(f"bot{i}", "10.0.0.66")
    assert g.wait_s("bot-next", "10.0.0.66") > 0
    assert g.wait_s("teacher", "10.0.0.2") == 0
    clock.t += PasscodeGuard.ADDRESS_WINDOW_S
    assert g.wait_s("bot-next", "10.0.0.66") == 0


def test_the_backoff_doubles_after_the_free_tries():
    clock = Clock()
    g = PasscodeGuard(clock)
    waits = []
    for _ in range(PasscodeGuard.FREE_TRIES + 4):
        clock.t += g.wait_s("s", "a")
        waits.append(round(g.wait_s("s", "a")))
        g.failed("s", "a")
    assert waits[: PasscodeGuard.FREE_TRIES + 1] == [0] * (PasscodeGuard.FREE_TRIES + 1)
    assert [round(g.wait_s("s", "a"))] == [32]
    g.succeeded("s")
    assert g.wait_s("s", "a") == 0


def _box_app() -> AppTest:
    def page():
        from views import share as sh

        sh.passcode_box()
        import streamlit as st

        st.write("unlocked" if sh.unlocked() else "locked")
    return AppTest.from_function(page, default_timeout=30)


def _type(at: AppTest, passcode: str) -> None:
    at.text_input(key="share_passcode_typed").input(passcode)
    at.button(key="share_unlock").click().run()


@pytest.mark.page
def test_twenty_wrong_passcodes_in_one_browser_do_not_stop_the_teacher_in_another(monkeypatch, caplog):
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    monkeypatch.setenv("SWIFTSAGE_PASSCODE", PASS)
    monkeypatch.setattr(share, "GUARD", PasscodeGuard())
    student, teacher = _box_app(), _box_app()
    caplog.set_level(logging.DEBUG)
    student.run()
    teacher.run()
    refusals = []
    for i in range(20):
        _type(student, f"guess-{i:04d}-wrong")
        refusals.append(student.error[0].value if student.error else "")
    assert sum("not the teacher passcode" in r for r in refusals) == PasscodeGuard.FREE_TRIES
    assert any("Too many wrong passcodes" in r for r in refusals)
    _type(student, PASS)  # the right one, from the browser that is waiting: still refused
    assert "locked" in student.markdown[-1].value and "Too many" in student.error[0].value
    _type(teacher, PASS)
    assert teacher.markdown[-1].value == "unlocked" and not teacher.error
    assert PASS not in caplog.text and "guess-0001" not in caplog.text  # no passcode, right or wrong, in a log
    assert "wrong teacher passcode" in caplog.text


@pytest.mark.page
def test_an_unlock_ends_after_the_operators_minutes(monkeypatch):
    monkeypatch.setenv("SWIFTSAGE_SHARE", "1")
    monkeypatch.setenv("SWIFTSAGE_PASSCODE", PASS)
    monkeypatch.setenv("SWIFTSAGE_UNLOCK_MINUTES", "30")
    monkeypatch.setattr(share, "GUARD", PasscodeGuard())
    at = _box_app()
    at.run()
    _type(at, PASS)
    assert at.markdown[-1].value == "unlocked"
    at.session_state["share_unlocked"] -= 31 * 60  # half an hour and a minute later
    at.run()
    assert at.markdown[-1].value == "locked" and any("ended after 30 min" in e.value for e in at.error)


def test_a_short_passcode_is_refused_at_launch(monkeypatch):
    monkeypatch.setenv("SWIFTSAGE_PASSCODE", "owl42")
    with pytest.raises(share.OperatorConfigError, match="at least 10"):
        share.operator()
    monkeypatch.setenv("SWIFTSAGE_PASSCODE", PASS)
    assert share.operator().passcode == PASS


def test_visitors_model_calls_wait_in_line_within_the_limits():
    clock = Clock()
    q = ModelQueue(per_session=2, per_hour=5, max_waiting=3, clock=clock)
    a, b, c = q.join("a"), q.join("b"), q.join("c")
    assert [a.position(), b.position(), c.position()] == [0, 1, 2]
    with pytest.raises(QueueRefused, match="still waiting"):
        q.join("a")  # one question at a time per browser
    with pytest.raises(QueueRefused, match="already waiting"):
        q.join("d")  # the line is full
    a.release()
    assert [b.position(), c.position()] == [0, 1]
    a2 = q.join("a")
    a2.release()
    with pytest.raises(QueueRefused, match="2 times in this hour"):
        q.join("a")  # the browser's limit
    b.release()
    c.release()
    q.join("d").release()
    with pytest.raises(QueueRefused, match="class has used its 5"):
        q.join("e")  # everyone's limit
    clock.t += 3600
    q.join("a").release()
