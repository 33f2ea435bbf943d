"""The trace: the contract between the agent and the app (docs/ARCHITECTURE.md). The agent writes one immutable
record per environment step, flushed and fsynced before the next step, so a crash never loses a finished step;
every page reads these files and nothing else.

File layout: line 1 is `{"kind": "header", ...EpisodeHeader}`, then one `{"kind": "step", ...}` per step, and
optionally a final `{"kind": "summary", ...}` when the episode ended cleanly.
"""
from .canonical import VOLATILE, canonical
from .io import TraceTail, TraceWriter, _from_dict, _record, has_summary, list_traces, read_episode, to_json_line
from .schema import (SCHEMA_VERSION, SUPPORTED_SCHEMAS, ActionMapping, AfterStep, CodeRevision, ConfigRecord, CriticCall,
                     EnvEvent, Episode, EpisodeHeader, EpisodeSummary, ForkOrigin, Gate1Decision, LLMCall,
                     MachineInfo, MemoryAtStart, MemoryRetrieval, MemorySummary, MemoryWrite, MenuChoice, ResumeInfo,
                     StagnationReport, StepRecord, SwiftCandidate, TraceError, Trigger, TriggerEvidence)

__all__ = ["SCHEMA_VERSION", "SUPPORTED_SCHEMAS", "VOLATILE", "ActionMapping", "AfterStep", "CodeRevision",
           "ConfigRecord", "CriticCall", "EnvEvent", "ForkOrigin", "MachineInfo", "MemoryAtStart", "MemorySummary", "ResumeInfo",
           "TriggerEvidence",
           "Episode", "EpisodeHeader", "EpisodeSummary", "Gate1Decision", "LLMCall", "MemoryRetrieval", "MemoryWrite",
           "MenuChoice", "StagnationReport", "StepRecord", "SwiftCandidate", "TraceError", "TraceTail", "TraceWriter",
           "Trigger", "_from_dict", "_record", "canonical", "has_summary", "list_traces", "read_episode", "to_json_line"]
