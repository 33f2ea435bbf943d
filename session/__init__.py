"""The browser session that owns an Agent: building it (agent_factory, llm), driving a live run (live_run) and
continuing a recorded episode (continue_run)."""
