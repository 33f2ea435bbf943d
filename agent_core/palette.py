"""One colour per actor, the same on every page and chart (DESIGN.md)."""
ACTOR_COLORS = {
    "swift": "#1f77b4",   # System 1
    "sage": "#9467bd",    # System 2 (buffer actions)
    "critic": "#ff7f0e",  # SRM's bounded Critic
    "gate1_drop": "#d62728",  # an action Gate-1 dropped
    "user": "#7f7f7f",
}
ACTOR_LABELS = {"swift": "Swift (fast)", "sage": "Sage (slow)", "critic": "Critic", "gate1_drop": "Gate-1 drop",
                "user": "You"}
MEMORY_TYPE_COLORS = {"observation": "#4C78A8", "reflection": "#F58518", "plan": "#54A24B"}
# Gate-1's three decisions: green goes ahead, amber was fixed, red (the Gate-1 drop colour) never ran.
GATE1_COLORS = {"ACCEPT": "#2ca02c", "REPAIR": "#d08c00", "DROP": ACTOR_COLORS["gate1_drop"]}
# Marks that are not actors: the stagnation detector's reports (timeline, cards).
STAGNATION_COLOR = "#8c564b"
# Memory reads (AMM's T1 / T4 retrievals) on the timeline.
MEMORY_COLOR = "#17becf"
