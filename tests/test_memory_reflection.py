"""Reflection with a scripted LLM (real store, real embeddings): trigger, questions, retrieval, cited insights."""
from __future__ import annotations

import json

import pytest

from memory_store import MemoryConfig, MemoryStream, ReflectionResult, maybe_reflect, should_reflect

pytestmark = pytest.mark.model

OBSERVATIONS = [
    "Opened the cupboard in the kitchen: it contains a metal pot.",
    "Filled the metal pot with water at the sink.",
    "Moved the metal pot onto the stove.",
    "Activated the stove; the water started to heat up.",
    "Tried 'heat water with stove': no known action matches that input.",
    "The thermometer reads 100 degrees celsius: the water is boiling.",
    "Focused on the water in the metal pot; the score rose to 45.",
    "The water turned into steam. Task completed with score 100.",
    "Focused on the stove by mistake in another variation: the task failed.",
    "The hallway connects the kitchen, the greenhouse and the workshop.",
]


class ScriptedLLM:
    """Answers each reflection prompt with fixed text and records what it was asked."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if "most salient high-level questions" in prompt:
            return ("1. How does the agent boil water?\n2. Which actions fail?\n3. What ends a task?\n"
                    "4. An extra question that must be ignored?")
        if "high-level insights" in prompt:
            return ("Heating needs a container on an activated stove (because of 1, 2)\n"
                    "Unsupported verbs are rejected (because of 3)\n"
                    "This line cites nothing\n"
                    "This one cites a statement that was not shown (because of 40)")
        if "Rating:" in prompt:
            return "Rating: 7"
        raise AssertionError(f"unexpected prompt: {prompt[:80]}")


def _fill(s: MemoryStream, importance: float, start: int = 0) -> None:
    s.add_many([dict(description=d, now=start + i, importance=importance, task="boil", episode="0")
                for i, d in enumerate(OBSERVATIONS)] * 2)


def test_reflection_produces_cited_insights(tmp_path):
    s = MemoryStream(MemoryConfig(), path=tmp_path / "r")
    llm = ScriptedLLM()
    _fill(s, 7.5)  # 20 memories x 7.5 = 150: the sum must *exceed* the threshold
    assert s.importance_since_last_reflection() == 150 and not should_reflect(s)
    assert maybe_reflect(s, llm, now=20) is None and llm.prompts == []
    s.add("Picked up the thermometer.", now=20, importance=2, task="boil")
    res = maybe_reflect(s, llm, now=21, task="boil", episode="0")
    assert isinstance(res, ReflectionResult) and res.importance_sum == 152 and not res.errors
    assert res.questions == ["How does the agent boil water?", "Which actions fail?", "What ends a task?"]
    # the question prompt showed the 100 most recent memories with their ids
    assert "[m000000] Opened the cupboard" in llm.prompts[0]
    assert len(res.retrievals) == 3 and all(r.trigger == "reflection" for r in res.retrievals)
    assert all(len(r.top_ids) == s.config.reflection_retrieve_k for r in res.retrievals)
    # insights cite the numbered statements of their own question's retrieval, mapped to memory ids
    first = res.retrievals[0]
    heating = [i for i in res.insights if i.question == res.questions[0]]
    assert heating[0].text == "Heating needs a container on an activated stove"
    assert heating[0].evidence_ids == first.top_ids[:2]
    # the same insight text from the next questions is not stored twice
    assert [i.text for i in res.insights] == ["Heating needs a container on an activated stove",
                                              "Unsupported verbs are rejected"]
    assert "This line cites nothing" in res.rejected
    assert any("not shown" in r for r in res.rejected)
    stored = [s.get(i) for i in res.reflection_ids]
    assert [m.type for m in stored] == ["reflection", "reflection"]
    assert all(m.depth == 1 and m.importance == 7 and m.created == 21 and m.task == "boil" for m in stored)
    assert stored[0].evidence_ids == first.top_ids[:2]
    # every prompt and output is recorded, and the record is JSON-safe
    purposes = [c.purpose for c in res.calls]
    assert purposes == ["reflection_questions"] + ["reflection_insights"] * 3 + ["importance"] * 2
    again = ReflectionResult.from_dict(json.loads(json.dumps(res.to_dict())))
    assert again.reflection_ids == res.reflection_ids and again.retrievals[0].top_ids == first.top_ids
    # the counter restarts after a reflection
    assert s.importance_since_last_reflection() == 0 and maybe_reflect(s, llm, now=22) is None
    # a reflection citing a reflection sits one level higher in the tree
    higher = s.add("Plan before acting", now=23, type="reflection", importance=6,
                   evidence_ids=[stored[0].id, s.memories()[0].id])
    assert higher.depth == 2


def test_a_failing_llm_is_recorded_and_not_retried_every_step(tmp_path):
    s = MemoryStream(MemoryConfig(reflection_threshold=50), path=tmp_path / "f")
    _fill(s, 3.0)
    calls = []

    def down(prompt: str) -> str:
        calls.append(prompt)
        raise ConnectionRefusedError("no LLM server")

    res = maybe_reflect(s, down, now=20)
    assert res is not None and res.insights == [] and len(calls) == 1
    assert "ConnectionRefusedError" in res.errors[0] and res.calls[0].error
    assert all(m.type == "observation" for m in s.memories())
    # no retry storm: the next step does not call the LLM again until importance builds up anew
    assert maybe_reflect(s, down, now=21) is None and len(calls) == 1
    _fill(s, 3.0, start=30)
    assert maybe_reflect(s, ScriptedLLM(), now=50).reflection_ids


@pytest.mark.parametrize("output", ["", "I cannot answer that."])
def test_unusable_outputs_store_nothing(tmp_path, output):
    s = MemoryStream(MemoryConfig(reflection_threshold=10), path=tmp_path / "u")
    _fill(s, 1.0)
    res = maybe_reflect(s, lambda p: output, now=20)
    assert res.reflection_ids == [] and len(s) == 20
