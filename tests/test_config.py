import json

import pytest

from agent_core.config import PRESETS, Config, apply_overrides, load_config, preset


def test_defaults_are_the_spec_numbers():
    c = Config()
    assert c.swift.history_k == 10
    assert c.controller.stuck_window == 5
    assert c.memory.recency_decay == 0.995
    assert c.memory.reflection_threshold == 150
    assert c.memory.reflection_recent_window == 100
    assert c.memory.reflection_questions == 3
    assert (c.memory.weight_recency, c.memory.weight_importance, c.memory.weight_relevance) == (1.0, 1.0, 1.0)
    assert c.amm.swift_max_records == 3 and c.amm.sage_max_records == 5
    assert c.amm.warmup_variations_per_task == 2
    assert c.srm.critic_budget == 3 and c.srm.critic_max_actions == 5
    assert c.env.step_limit == 100
    assert c.eval.variations_per_task == 10
    assert (c.eval.short_max_gold_len, c.eval.medium_max_gold_len) == (20, 50)
    assert set(c.env.simplifications) == {"teleportAction", "openDoors", "selfWateringFlowerPots",
                                          "noElectricalAction"}


def test_presets_set_their_flags():
    assert set(PRESETS) >= {"baseline", "amm", "srm", "full", "full-critic6", "full-weak-memory",
                            "full-no-swift-t1"}
    assert not preset("baseline").amm.enabled and not preset("baseline").srm.enabled
    assert preset("amm").amm.enabled and not preset("amm").srm.enabled
    assert preset("srm").srm.enabled and not preset("srm").amm.enabled
    full = preset("full")
    assert full.amm.enabled and full.srm.enabled and full.preset == "full"
    assert preset("full-critic6").srm.critic_budget == 6
    assert preset("full-weak-memory").amm.warmup is False
    assert preset("full-no-swift-t1").amm.swift_injection is False
    with pytest.raises(ValueError, match="unknown preset"):
        preset("turbo")


def test_mechanisms_are_wired_once_from_the_config():
    """The step asks `parts` what runs; a part that is off is absent, not a flag read later."""
    from agent_core.control.parts import Parts

    base, srm, full = (Parts.wire(preset(p), None) for p in ("baseline", "srm", "full"))
    assert base.gate is None and base.critic is None and not base.stagnation and base.loop_guard_streak is None
    assert srm.gate is not None and srm.critic is not None and srm.stagnation and not srm.amm
    assert full.amm and "amm" in full.names() and "critic" in full.names() and "gate1" not in base.names()
    no_critic = Parts.wire(apply_overrides(preset("srm"), ["srm.critic_enabled=false"]), None)
    assert no_critic.gate is not None and no_critic.critic is None and "critic" not in no_critic.names()
    swift_alone = Parts.wire(apply_overrides(preset("baseline"), ["controller.sage_enabled=false"]), None)
    assert not swift_alone.sage and "sage" not in swift_alone.names()


def test_file_and_overrides(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({"controller": {"stuck_window": 7}, "memory": {"recency_decay": 0.99}}))
    c = load_config(p, "srm", ["srm.critic_budget=4", "llm.backend=openai"])
    assert c.controller.stuck_window == 7 and c.memory.recency_decay == 0.99
    assert c.srm.critic_budget == 4 and c.srm.enabled and c.llm.backend == "openai"
    t = tmp_path / "cfg.toml"
    t.write_text("[swift]\nhistory_k = 8\n")
    assert load_config(t).swift.history_k == 8
    assert Config.from_dict(c.to_dict()) == c


@pytest.mark.parametrize("bad, match", [
    ({"srm.critic_budgett": 1}, "unknown config field"),
    ({"nosuch.x": 1}, "unknown config section"),
    ({"srm.critic_budget": "three"}, "expected an integer"),
    ({"amm.enabled": "yes"}, "expected true/false"),
])
def test_bad_overrides_are_clear_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        apply_overrides(Config(), bad)


def test_unknown_key_in_file_is_an_error(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({"swift": {"histroy_k": 3}}))
    with pytest.raises(ValueError, match="histroy_k"):
        load_config(p)


def test_every_enumerated_option_refuses_a_misspelling():
    """Each option the code compares with a string is checked when the config loads: a typo names the field and
    the allowed values instead of silently running the default."""
    from agent_core.config import CHOICES

    for dotted, allowed in CHOICES.items():
        section, name = dotted.split(".")
        assert getattr(getattr(Config(), section), name) in allowed, dotted  # the default is one of them
        for ok in allowed:
            assert getattr(getattr(apply_overrides(Config(), {dotted: ok}), section), name) == ok
        with pytest.raises(ValueError, match=f"{dotted}: 'x{allowed[0]}' is not one of {', '.join(allowed)}"):
            apply_overrides(Config(), {dotted: f"x{allowed[0]}"})


def test_cli_misspelled_option_exits_2_with_the_allowed_values():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "21", "--set",
                        "amm.scoring=gaa"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "amm.scoring: 'gaa' is not one of ga, relevance" in r.stderr


@pytest.mark.parametrize("args, expect", [
    (["--preset", "fulll"], "invalid choice: 'fulll' (choose from 'baseline', 'amm', 'srm', 'full'"),
    (["--set", "llm.backend=gpt"], "llm.backend: 'gpt' is not one of embedded, openai, scripted"),
    (["--set", "srm.critic_buffer_policy=apend"], "srm.critic_buffer_policy: 'apend' is not one of replace, append"),
])
def test_cli_misspelled_preset_or_backend_exits_2_with_the_choices(args, expect):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "agent_core.run", "--task", "boil", "--variation", "21", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and expect in r.stderr, r.stderr[-400:]


def test_config_hash_is_stable_and_changes_with_any_single_field():
    import dataclasses
    import subprocess
    import sys

    from agent_core.provenance import config_hash

    base = Config()
    h = config_hash(base.to_record())
    other = subprocess.run([sys.executable, "-c", "from agent_core.config import Config; from agent_core.provenance "
                            "import config_hash; print(config_hash(Config().to_record()))"],
                           capture_output=True, text=True, timeout=120).stdout.strip()
    assert h == other and len(h) == 16  # the same in another process
    seen = {h}
    for section in ("swift", "sage", "controller", "amm", "srm"):
        part = getattr(base, section)
        for f in dataclasses.fields(part):
            value = getattr(part, f.name)
            if isinstance(value, bool):
                changed = not value
            elif isinstance(value, (int, float)):
                changed = value + 1
            elif isinstance(value, str):
                changed = value + "x"
            else:
                continue
            cfg = dataclasses.replace(base, **{section: dataclasses.replace(part, **{f.name: changed})})
            seen.add(config_hash(cfg.to_record()))
            assert config_hash(cfg.to_record()) != h, f"{section}.{f.name}"
    assert config_hash(dataclasses.replace(base, seed=1).to_record()) != h


def test_the_seed_reaches_both_llm_backends_and_the_generators():
    import random

    import numpy as np

    from agent_core.llm import make_backend
    from agent_core.llm.openai_compat import OpenAICompatBackend
    from agent_core.provenance import seed_everything

    cfg = apply_overrides(Config(), {"seed": 7, "llm.backend": "openai", "llm.base_url": "http://127.0.0.1:9/v1"})
    be = make_backend(cfg.llm, seed=cfg.seed)
    assert isinstance(be, OpenAICompatBackend) and be.seed == 7
    assert make_backend(apply_overrides(Config(), {"llm.backend": "embedded"}).llm, seed=7).seed == 7
    seed_everything(7)
    a = (random.random(), float(np.random.rand()))
    seed_everything(7)
    assert (random.random(), float(np.random.rand())) == a
