"""Light and dark themes (.streamlit/config.toml) keep the actor colours readable: every actor / mark colour has a
contrast of at least 3:1 on both backgrounds (WCAG's minimum for graphics), and a chip's text is at least 4.5:1."""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from agent_core.palette import (ACTOR_COLORS, GATE1_COLORS, MEMORY_COLOR, MEMORY_TYPE_COLORS, SCORE_LINE,
                                STAGNATION_COLOR, contrast, text_on)
from views.common import badge, chip
from views.evaluation import PRESET_COLORS

CONFIG = tomllib.loads((Path(__file__).resolve().parents[1] / ".streamlit" / "config.toml").read_text())
MARKS = {**{f"actor {k}": v for k, v in ACTOR_COLORS.items()}, **{f"gate1 {k}": v for k, v in GATE1_COLORS.items()},
         **{f"memory {k}": v for k, v in MEMORY_TYPE_COLORS.items()}, **{f"preset {k}": v for k, v in PRESET_COLORS.items()},
         "stagnation": STAGNATION_COLOR, "memory read": MEMORY_COLOR, "score line": SCORE_LINE}


def test_both_themes_are_defined():
    light, dark = CONFIG["theme"]["light"], CONFIG["theme"]["dark"]
    assert contrast(light["backgroundColor"], light["textColor"]) >= 7
    assert contrast(dark["backgroundColor"], dark["textColor"]) >= 7
    assert contrast(light["backgroundColor"], dark["backgroundColor"]) > 10  # really two themes


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.parametrize("name", sorted(MARKS))
def test_marks_read_on_both_backgrounds(theme, name):
    bg = CONFIG["theme"][theme]["backgroundColor"]
    assert contrast(MARKS[name], bg) >= 3.0, (name, MARKS[name], theme, round(contrast(MARKS[name], bg), 2))


@pytest.mark.parametrize("system", sorted(ACTOR_COLORS))
def test_chip_text_is_readable(system):
    color = ACTOR_COLORS[system]
    assert contrast(color, text_on(color)) >= 4.5
    assert f"color:{text_on(color)}" in chip("x", color) and f"color:{text_on(color)}" in badge(system)


def test_contrast_is_the_wcag_ratio():
    assert round(contrast("#000000", "#ffffff"), 1) == 21.0 and contrast("#777777", "#777777") == 1.0
    assert text_on("#ffffff") == "#000000" and text_on("#000000") == "#ffffff"
