"""One colour per actor, the same on every page and chart (docs/AGENT.md §9), chosen to stay readable in the
app's light and dark themes (.streamlit/config.toml): every mark has a contrast of at least 3:1 against both backgrounds
(WCAG's minimum for graphics), and text on a coloured chip is black or white, whichever reads better (>= 4.5:1)."""
ACTOR_COLORS = {
    "swift": "#1f77b4",   # System 1
    "sage": "#9467bd",    # System 2 (buffer actions)
    "critic": "#dd6b00",  # SRM's bounded Critic
    "gate1_drop": "#d62728",  # an action Gate-1 dropped
    "user": "#7f7f7f",
    "branch": "#a0527a",  # a rollout's given action (a road not taken)
}
ACTOR_LABELS = {"swift": "Swift (fast)", "sage": "Sage (slow)", "critic": "Critic", "gate1_drop": "Gate-1 drop",
                "user": "You", "branch": "Branch"}
MEMORY_TYPE_COLORS = {"observation": "#4C78A8", "reflection": "#d4700b", "plan": "#54A24B"}
# Gate-1's three decisions: green goes ahead, amber was fixed, red (the Gate-1 drop colour) never ran.
GATE1_COLORS = {"ACCEPT": "#2ca02c", "REPAIR": "#b07800", "DROP": ACTOR_COLORS["gate1_drop"]}
# Marks that are not actors: the stagnation detector's reports (timeline, cards).
STAGNATION_COLOR = "#8c564b"
# Memory reads (AMM's T1 / T4 retrievals) on the timeline.
MEMORY_COLOR = "#129aa8"
# the score line and the step cursor: a mid grey reads on the light and the dark theme (#222 vanished on dark)
SCORE_LINE = "#808080"


def luminance(color: str) -> float:
    """WCAG relative luminance of a #rrggbb colour."""
    h = color.lstrip("#")
    rgb = [int(h[i:i + 2], 16) / 255 for i in (0, 2, 4)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def contrast(a: str, b: str) -> float:
    """WCAG contrast ratio of two colours (1 .. 21)."""
    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def text_on(background: str) -> str:
    """Black or white, whichever is easier to read on `background`."""
    return "#000000" if contrast(background, "#000000") >= contrast(background, "#ffffff") else "#ffffff"
