"""AMM: adaptive episodic memory (docs/AGENT.md §5) on the memory stream (memory_store/)."""
from .episodic import CRITIC_HEADER, SAGE_HEADER, EpisodicMemory
from .salience import RULES, StepFacts, parse_rules, record_text, salience
from .store import StoreUnavailable, export_store, import_export, prepare_store, warm_manifest

__all__ = ["CRITIC_HEADER", "SAGE_HEADER", "EpisodicMemory", "RULES", "StepFacts", "StoreUnavailable",
           "export_store", "import_export", "parse_rules", "prepare_store", "record_text", "salience",
           "warm_manifest"]
