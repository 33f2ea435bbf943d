"""The episode as data: the agent's state between steps, the one function that advances it (`apply`), and the
rules for continuing a recorded episode (resume, fork). Pure: no environment, no model; pages may import it."""
from .reducer import apply, check, fold, sage_called, sage_streak_after
from .replay import ReplayError, resumable, resume_problem
from .state import AgentState, Buffered, digest, initial_state

__all__ = ["AgentState", "Buffered", "ReplayError", "apply", "check", "digest", "fold", "initial_state", "resumable",
           "resume_problem", "sage_called", "sage_streak_after"]
