"""Every sentence a student reads is true of its step record: the narration (views/narration.py), the decisions'
own texts and the Ask page's exact answers (views/ask_records.py), checked on every shipped example and every
shipped evaluation trace. A sentence names who acted, whether Sage was asked, an action, a number: each is
compared with the record's field that says it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_core.trace import read_episode
from views.ask_records import SYSTEMS, answer_from_records
from views.narration import WHY, actor_sentence, gate1_sentence, memory_sentence, narrate, score_sentence, srm_sentence

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted(p for p in (ROOT / "assets").rglob("*.jsonl"))
SAGE_PURPOSES = {"plan", "ground", "focus_review"}


def _quoted(text: str) -> list[str]:
    return re.findall(r"'([^']*)'", text)


def _same_action(quoted: str, action: str) -> bool:
    """A quoted action is the record's, whole or cut at a word boundary (`…`)."""
    action = " ".join(action.split())
    if not quoted.endswith("…"):
        return quoted == action
    head = quoted[:-1]
    return action.startswith(head) and (len(action) == len(head) or action[len(head)] == " ")


def _problems(path: Path) -> list[str]:
    ep = read_episode(path, tolerant=True)
    out: list[str] = []
    for r in ep.steps:
        where = f"{path.name} step {r.step}"
        actor = actor_sentence(r, ep.header)
        sage_called = any(c.purpose in SAGE_PURPOSES for c in r.llm_calls)
        if "so Sage was asked" in actor:
            if not (r.trigger is not None and r.trigger.name in WHY and (sage_called or r.system == "sage")):
                out.append(f"{where}: says Sage was asked, but no Sage call is recorded: {actor}")
        if re.search(r"so Sage was asked[^:]*: it (?:picked|chose)", actor) and r.system != "sage":
            out.append(f"{where}: says Sage chose, but {r.system} acted: {actor}")
        if actor.startswith("Swift chose") and r.system != "swift":
            out.append(f"{where}: says Swift chose, but {r.system} acted")
        if actor.startswith("Sage's plan went on") and r.system != "sage":
            out.append(f"{where}: says Sage's plan went on, but {r.system} acted")
        if actor.startswith("The Critic's suggestion") and r.system != "critic":
            out.append(f"{where}: says the Critic's suggestion, but {r.system} acted")
        m = re.search(r"(?:it picked|it chose|Swift chose|Swift's|suggestion|You typed) '([^']*)'", actor)
        if m and r.menu is None and not _same_action(m.group(1), r.action):
            out.append(f"{where}: the sentence's action {m.group(1)!r} is not the record's {r.action!r}")
        score = score_sentence(r)
        m = re.search(r"earned ([+-]?[\d.]+) points \(now ([\d.-]+)\)", score)
        if m and (float(m.group(1)) != r.reward or float(m.group(2)) != r.score):
            out.append(f"{where}: {score!r} but reward {r.reward}, score {r.score}")
        if "did not accept" in score and r.action_valid is not False:
            out.append(f"{where}: says the game did not accept it, but action_valid is {r.action_valid}")
        if score.startswith("Task complete") and r.score < 100:
            out.append(f"{where}: says complete at score {r.score}")
        g = gate1_sentence(r)
        drops = sum(d.decision == "DROP" for d in r.gate1)
        if g and "stopped" in g:
            m = re.search(r"and (\d+) more", g)
            said = 1 + (int(m.group(1)) if m else 0)
            if said != drops:
                out.append(f"{where}: Gate-1 sentence counts {said} drops, the record has {drops}")
        mem = memory_sentence(r)
        m = re.search(r"gave (.+?) (\d+) record\(s\)", mem or "")
        if m:
            x = next(x for x in r.retrievals if x.injected_ids and not x.error)
            if int(m.group(2)) != len(x.injected_ids):
                out.append(f"{where}: memory sentence counts {m.group(2)} records, {len(x.injected_ids)} injected")
        crit = srm_sentence(r)
        m = re.search(r"put (\d+) action\(s\) into the buffer \(call (\d+) of (\d+)\)", crit or "")
        if m and (int(m.group(1)) != len(r.critic.admitted) or int(m.group(2)) != r.critic.budget_used):
            out.append(f"{where}: Critic sentence {m.group(0)!r} against {len(r.critic.admitted)} admitted, "
                       f"call {r.critic.budget_used}")
        for d in r.decisions:
            text = d.describe()
            if re.search(r"Sage (?:is|was) (?:called|asked)", text) and not sage_called:
                out.append(f"{where}: decision {d.kind} says Sage is called, but no Sage call is recorded")
        sources = [" ".join(str(t).split()) for t in (r.action, r.observation, r.trigger and r.trigger.evidence,
                                                         r.critic and r.critic.diagnosis, *(g.proposed for g in r.gate1))]
        for sentence in narrate(r, ep.header):
            for q in _quoted(sentence):
                head = q[:-1]
                if not q.endswith("…") or not head:
                    continue
                for src in sources:
                    i = src.find(head)
                    if i >= 0 and i + len(head) < len(src) and src[i + len(head)] != " ":
                        out.append(f"{where}: a quote is cut mid-word: {q!r}")
                        break
        # the Ask page's exact answer about this step names the system that acted and the action
        exact = answer_from_records(f"Who acted at step {r.step} and why?", ep.header, ep.steps, ep.summary)
        lead = f"At step {r.step} you typed" if r.system == "user" else f"At step {r.step} {SYSTEMS[r.system]} acted"
        if exact is None or exact.steps != [r.step] or not exact.text.startswith(lead):
            out.append(f"{where}: Ask's exact answer does not name {r.system}: {exact and exact.text[:80]}")
    return out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:70])
def test_every_sentence_matches_its_record(path):
    problems = _problems(path)
    assert not problems, "\n".join(problems[:10])


def test_the_walk_covers_the_shipped_examples_and_evaluations():
    names = {p.parent.name for p in TRACES}
    assert any(p.is_relative_to(ROOT / "assets" / "episodes") for p in TRACES)
    assert any(p.is_relative_to(ROOT / "assets" / "evaluations") for p in TRACES)
    assert {"baseline", "full"} <= names | {p.name.rsplit("-", 1)[-1].removesuffix(".jsonl") for p in TRACES}


def test_a_cut_quote_ends_at_a_word():
    from views.narration import _q

    assert _q("pour cup containing yellow paint in art studio into cup containing blue paint", 70) == \
        "'pour cup containing yellow paint in art studio into cup containing…'"
    assert _q("short one", 70) == "'short one'"
