"""The config's sections, one dataclass per part of the agent (docs/AGENT.md's numbers as named, documented fields).

`agent_core.config` puts them together into `Config`, with the presets and loading; import them from there.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

# The SwiftSage protocol's simplifications, named explicitly (the package's own "easy" string may differ).
DEFAULT_SIMPLIFICATIONS: tuple[str, ...] = (
    "teleportAction",
    "openDoors",
    "selfWateringFlowerPots",
    "noElectricalAction",
)
# These four tasks refuse `noElectricalAction` and run without it (docs/AGENT.md §1).
ELECTRICAL_TASKS: tuple[str, ...] = (
    "power-component",
    "power-component-renewable-vs-nonrenewable-energy",
    "test-conductivity",
    "test-conductivity-of-unknown-substances",
)


@dataclass
class EnvConfig:
    """ScienceWorld protocol (docs/AGENT.md §1)."""

    step_limit: int = 100  # an episode ends at success, failure or this many steps
    simplifications: tuple[str, ...] = DEFAULT_SIMPLIFICATIONS
    electrical_tasks: tuple[str, ...] = ELECTRICAL_TASKS  # run without noElectricalAction
    jvm_restart_limit: int = 3  # restarts of a dead JVM per episode before giving up
    jar_path: str | None = None  # None: the jar bundled with the scienceworld package
    # start a new JVM for every episode: ScienceWorld names some objects by what the JVM played before, so an
    # episode replays (fork, resume) and evaluates exactly only in a fresh JVM (costs about a second a reset)
    fresh_jvm: bool = True


@dataclass
class SwiftConfig:
    """Swift, System 1 (docs/AGENT.md §2)."""

    history_k: int = 10  # K past steps in the input window
    num_candidates: int = 5  # ranked candidates returned by beam search
    max_input_tokens: int = 1024  # capped at the length the checkpoint was trained with
    max_output_tokens: int = 32
    checkpoint_dir: str = "assets/swift"
    quantize: str = "int8"  # int8 dynamic quantization of the linear layers on a CPU ("none": float32)
    # CPU threads a Swift call may use, at most (0: every core, up to 2). Each call takes the cores free when it
    # starts; Swift's numbers are the same on 1 and 2 threads (checked bit for bit), so this changes its speed, never
    # its choices; above 2 that is not checked
    threads: int = 0
    # candidates kept from the unconstrained search (its top-1 is Swift's guess and the `top1` invalid rule's
    # test). The search runs in one batch with the valid ranking, with num_candidates beams like it
    unconstrained_beams: int = 3
    # A `focus on` is scored against every focus target in view; below this margin (p(best) - p(second))
    # Swift is not sure which object, and the critical trigger hands the focus to Sage.
    focus_margin: float = 0.5
    # Swift alone (no Sage): set an unsure focus aside for the best non-focus action. Off by default: on the
    # 90 test episodes it turned 3-4 endings at -100 into small scores but lowered Final (docs/BENCHMARKS.md).
    defer_unsure_focus: bool = False
    # Swift never focuses on an object the task does not name (boil *tin*: not the pot of water), where the
    # task's train gold paths show that it names them (agent_core/task_focus.py)
    task_focus_check: bool = True


@dataclass
class SageConfig:
    """Sage, System 2 (docs/AGENT.md §3)."""

    grounding_history_k: int = 10  # last steps shown to the grounding prompt
    # the planning prompt's steps start at a step that moves in jumps of this many (between k and k + anchor - 1
    # steps shown), so two Sage calls a few steps apart share the whole history as a prefix that llama.cpp (or
    # vLLM's prefix cache) does not read again; 0: exactly the last k steps (the window slides every step)
    history_anchor: int = 5
    worked_examples: int = 1  # train gold trajectories of the same task shown to grounding
    plan_max_tokens: int = 160  # Q1-Q5, one short sentence each
    ground_max_tokens: int = 200  # free-form grounding
    # numbered grounding: pick from a short list of valid actions (sage/choices.py); "free": write commands
    grounding: str = "numbered"
    choices: int = 12  # options in the numbered list
    swift_choices: int = 8  # of which at most this many are Swift's best valid actions (a wider beam)
    max_picks: int = 1  # commands Sage picks for the buffer (a small model picks best one at a time)
    choose_max_tokens: int = 24  # "3, 7, 12" needs a handful of tokens
    # the numbered pick is the next turn of the plan's conversation (prompts/choose_turn.txt), so the model reads
    # only the list; off: one new prompt that repeats the context and the plan (prompts/choose.txt)
    choose_turn: bool = True
    # with choose_turn: "number" numbers the list and asks for a number; "command" shows it as "- command" lines and
    # Sage copies the command it picks. The 1.5B default answers "11" to nearly every numbered list, yet on the 30
    # Baseline episodes its picks by content scored lower (docs/BENCHMARKS.md), so "number" stays the default
    choose_reply: str = "number"
    # how Sage picks from the list: "score" (the model's mean log-probability of each option as its reply after the
    # plan, the list shown in a fixed order: the pick follows what the options say, never where they stand) or
    # "generate" (Sage writes a number or a command: the earlier rule; the 1.5B model answered "11" to 58 of 91
    # lists). A backend that cannot score falls back to "generate", with a note
    pick: str = "score"
    # what the pick by score compares: "mean" (the mean log-probability per token of each option as the reply after
    # the plan) or "pmi" (its summed log-probability there, less its log-probability as the reply to a prompt with no
    # task, state or plan, prompts/alone.txt: what the context adds to the option). Both let "move inclined plane
    # with a platinum surface to inclined plane with a aluminum surface" win a list whose plan named the block (the
    # 1.5B model copies its plan's long phrases; pmi also rewards length, since words alone cost ~7 nats a token),
    # so the mean stays (docs/BENCHMARKS_JOURNAL.md). The focus review always uses the mean
    pick_rule: str = "mean"
    # when Sage's scored pick replaces Swift's action: "best" (always: the best-scored option is played); "margin"
    # (only when its score beats the runner-up's by at least `accept_margin`, else Sage defers and Swift's action
    # stands); "agree" (only when Swift ranks it among its first `accept_top_k` valid actions, else Sage defers).
    # Chosen by decision value on dev (docs/EVALUATION.md: benchmarks/sage_pick_rules.py)
    accept: str = "best"
    accept_margin: float = 0.2
    accept_top_k: int = 3
    look_chars: int = 900  # the room description shown to Sage is clipped to this
    history_obs_chars: int = 160  # each past observation in Sage's prompts is clipped to this
    temperature: float = 0.0
    map_similarity_threshold: float = 0.6  # min cosine to map a prose action onto a valid one
    # Sage's numbered list and focus review leave out the focus targets the task does not name (or names for
    # later), and a Sage command that lands on one is not played: the same check as swift.task_focus_check
    task_focus_check: bool = True


@dataclass
class ControllerConfig:
    """Switching between Swift and Sage (docs/AGENT.md §4)."""

    sage_enabled: bool = True  # off: Swift acts alone and no rule calls Sage (benchmarks without an LLM)
    stuck_window: int = 5  # stuck: the rewards of the last 5 steps sum to 0
    buffer_fail_limit: int = 3  # leave Sage mode after this many buffered actions fail in a row
    critical_prefixes: tuple[str, ...] = ("focus on",)  # key decisions that can end the task
    # the last safeguard before the JVM: only a valid action of the state (or a menu number) is sent; anything
    # else becomes 'look around' with a note. Off only in tests that play invalid text on purpose
    only_valid_actions: bool = True
    # "off" (default): no focus goes to Sage, Swift's focus acts; "unsure": Sage reviews a focus only when Swift's
    # margin among the focus targets is below swift.focus_margin; "always": every focus goes to Sage (SwiftSage's
    # rule). Off because on dev the 1.5B default's reviews cost points against Swift's focus (docs/EVALUATION.md)
    critical_review: str = "off"
    # how Sage reviews a critical focus: "choose" (one short call: which of the focus targets in view, or none
    # yet) or "replan" (SwiftSage: the Q1-Q5 plan and the numbered grounding, from scratch)
    focus_review: str = "choose"
    # the invalid trigger: "top1" (SwiftSage: the unconstrained top-1 is not valid) or "ranked" (no valid
    # action scores at least invalid_min_score, the mean log-probability per token of Swift's best valid action)
    invalid_rule: str = "ranked"
    invalid_min_score: float = -1.5
    # Swift is forced after this many Sage calls in a row (SwiftSage's code): when Sage was called this often with
    # no step of Swift's own in between, the next step's triggers are set aside once and Swift acts (a focus Swift
    # is unsure of becomes its best other action). Stops a Sage that replans the same wrong thing every step.
    # 0 = off (Sage may be called on every step)
    sage_streak_limit: int = 2
    # phrases in an observation that report a failure or anomaly (the "unexpected" trigger)
    unexpected_markers: tuple[str, ...] = (
        "broken", "is not moveable", "is not edible", "not closeable", "not openable", "can't", "cannot",
        "doesn't", "unknown action", "failed", "nothing happens", "not possible",
    )


@dataclass
class LLMConfig:
    """Which backend plays Sage / Critic / importance rater."""

    backend: str = "embedded"  # embedded | openai | scripted
    embedded_model: str = "qwen2.5-coder-1.5b"  # or smollm2-135m (fast, incoherent: tests only)
    base_url: str = "http://127.0.0.1:8000/v1"
    model: str = ""  # model name served at base_url (vLLM: the name given to `vllm serve`)
    # never written anywhere (traces, evaluation files): Config.to_record() blanks it; by default it comes from
    # the environment (SWIFTSAGE_LLM_API_KEY or OPENAI_API_KEY), "EMPTY" for servers that need none (vLLM)
    api_key: str = field(default_factory=lambda: os.environ.get("SWIFTSAGE_LLM_API_KEY")
                         or os.environ.get("OPENAI_API_KEY") or "EMPTY")
    timeout_s: float = 120.0
    max_retries: int = 2
    n_ctx: int = 4096
    # 0 = auto, chosen at the start of every call (llm/embedded.py, `auto_threads`): every core when the others are
    # idle (an agent waiting for Sage leaves them idle: 2 threads read a prompt ~1.8x faster than 1 on 2 cores), one
    # core fewer per busy one otherwise, since llama.cpp threads spin-wait and a thread sharing its core with another
    # process stalls the rest (measured: 16 s vs 62 s for one SmolLM2 call with the test suite running). Only other
    # processes count: this one's own bursts (the app redrawing pages for a class) end long before the call. n > 0: n.
    n_threads: int = 0


@dataclass
class AMMConfig:
    """Adaptive episodic memory (docs/AGENT.md §5; §10 for the reference code's rules): salience-gated
    writes after every step, triggered retrieval (T1-T4) and bounded injection. Runs only when `enabled`."""

    enabled: bool = False
    # --- where the memory lives. "" = <runs dir>/memory/agent (or agent-empty when warmup is off): one store
    # that live runs keep writing; it starts as a copy of the shipped warm store. Evaluation passes its own copy.
    store_dir: str = ""
    warmup: bool = True  # start from the shipped warm store; off in the "weak (unfilled) memory" variant
    warmup_variations_per_task: int = 2  # `python -m agent_core.warmup`: train variations per task (60 episodes)
    # --- salience-gated writes: the first rule that holds tags the step; no rule holds -> nothing is written.
    # "rule:tag" pairs in precedence order (agent_core/amm/salience.py defines each rule).
    tag_rules: tuple[str, ...] = ("ended_100:success", "ended_other:avoidance", "invalid_feedback:avoidance",
                                  "focus_reward:success", "big_reward:success", "wait_reward:near-miss",
                                  "small_reward:near-miss")
    success_min_reward: float = 20.0  # big_reward: a reward this large is a success on its own
    near_miss_min_reward: float = 0.0  # small_reward: reward above this (and below success_min_reward)
    invalid_phrases: tuple[str, ...] = ("No known action matches that input", "You can't", "You cannot",
                                        "Unknown action")
    record_history: int = 5  # last actions/observations in a record
    record_obs_chars: int = 200  # observation clipped to this in a record
    record_inventory_chars: int = 100
    record_history_obs_chars: int = 60
    # --- importance: "tag" (from tag and reward, no LLM call per step) or "llm" (GA's 1..10 rating)
    importance_mode: str = "tag"
    importance_success: float = 7.0
    importance_terminal_success: float = 10.0
    importance_near_miss: float = 5.0
    importance_avoidance: float = 3.0
    importance_terminal_failure: float = 6.0
    importance_plan: float = 4.0
    importance_reflection: float = 8.0  # insights when importance_mode is "tag" (no rating call per insight)
    importance_reward_bonus: float = 2.0  # + this * min(1, reward / success_min_reward) on positive rewards
    # --- retrieval: the stream's GA score, or relevance only (to measure what recency + importance add)
    scoring: str = "ga"  # ga | relevance
    same_task_only: bool = True  # retrieve only memories of the task being played
    retrieve_pool: int = 15  # memories retrieved before dedupe and caps pick what is injected
    # --- T1: Swift's top action is invalid -> retrieve, retry Swift once with the records in its input
    swift_injection: bool = True  # off in the "Full without Swift T1 injection" variant (retrieve + log only)
    # when T1 fires: "invalid_rule" (when the controller's invalid trigger does: Swift rates no valid action)
    # or "top1" (whenever Swift's unconstrained top guess is not valid: the earlier rule, which fired on most
    # steps, usually when Swift's best valid action was fine)
    t1_trigger: str = "invalid_rule"
    # a valid retry replaces Swift's ranked action only when it is among Swift's own top k valid actions (memory
    # may reorder what Swift already considers, not bring in what it ranks low); 0 = any valid retry replaces
    t1_retry_top_k: int = 5
    # the objects the memory text for Swift may name: "in_view" (only records whose action names objects in the
    # room, the inventory or an open container, shown without their old observation) or "any" (the earlier rule:
    # records of other variations named objects that are not there, "focus on unknown substance j")
    swift_memory_objects: str = "in_view"
    # memories from another variation of the task are marked "(another variation)" in Sage's hints
    mark_other_variations: bool = True
    swift_max_records: int = 3
    swift_field_chars: tuple[int, ...] = (40, 60, 80)  # action / result / score transition clips (reference)
    # --- T2: no progress for these many steps (each crossing fires once); T3: the same invalid action again
    t2_no_progress_steps: tuple[int, ...] = (4, 8)
    t3_repeat_invalid: int = 2
    recent_window: int = 10  # "recent" for T3 (invalid actions) and T4 (did actions fail?): the last 10 steps
    # --- T4: every Sage planning call gets at most this many records under a "hints" header
    # false: only memories of earlier episodes, as the header says. true (the earlier rule): this episode's own
    # records too, its stored plans among them, which the 1.5B model copied into its next plan word for word
    # (14 of 14 plan calls with such a hint on dev variations), clipped "..." included, so the plan never moved on
    t4_this_episode: bool = False
    sage_max_records: int = 5
    sage_record_chars: int = 240  # per-record cap
    sage_block_chars: int = 1400  # per-block cap (records are dropped from the end, whole)
    sage_type_order: tuple[str, ...] = ("success", "near-miss", "insight", "plan", "avoidance")
    sage_max_per_type: tuple[str, ...] = ("insight:2", "plan:1", "avoidance:2")
    # --- the Critic's evidence slot (Full): up to this many that worked + this many to avoid
    critic_worked_records: int = 3
    critic_avoid_records: int = 1
    # --- plans and reflection
    store_plans: bool = True  # Sage's Q1-Q5 answers and buffer become a `plan` memory
    reflection: str = "after_episode"  # after_episode (background in the app) | off
    reflection_max_tokens: int = 200
    # memories shown to the reflection prompt (GA: 100). 40 one-line statements fit the embedded 1.5B model's
    # 4,096-token context with room for the answer; raise it with a larger model.
    reflection_window: int = 40


@dataclass
class SRMConfig:
    """Self-reflection (docs/AGENT.md §6; §10 for the reference code's numbers): Gate-1, the
    stagnation detector, the bounded Critic, and Swift's loop guard. All of it runs only when `enabled`."""

    enabled: bool = False
    # --- Gate-1: every action from every source, before it runs
    gate1_max_buffer_tries: int = 5  # buffered actions tried per step before giving up on the buffer
    gate1_drops_for_sage: int = 2  # this many drops in one step hand the step to Sage (once)
    gate1_max_swift_tries: int = 3  # Swift candidates tried per step (its ranked valid actions)
    # when every candidate Swift ranked was dropped and Sage gave nothing: Swift ranks again over only the valid
    # actions Gate-1 admits (off: 'look around', the earlier rule, which changes nothing and so met the same dead
    # end step after step where the game's valid-action list named used-up paint cups)
    gate1_rerank_admissible: bool = True
    gate1_repair_max_edit: int = 2  # REPAIR_TYPO: at most this many character edits, one candidate, same verb
    gate1_nearest_min_similarity: float = 0.75  # REPAIR_NEAREST (Sage / Critic only): same verb, this cosine
    gate1_avoid_steps: int = 5  # under avoid_binds = "all": a report's actions to avoid bind this many steps
    # where a stagnation report's "actions to avoid" and "no focus now" bind: "critic" (the Critic's prompt and
    # its answer only, as the reference has it) or "all" (Gate-1 also drops them from Swift and Sage for
    # gate1_avoid_steps: the earlier rule, which dropped actions the agent needed, 20 of 24 drops in an evaluation)
    avoid_binds: str = "critic"
    # Gate-1 "target unseen" for every verb (reference reason, with "not valid" and "no-op"): an action that names
    # an object not in the room text, the inventory or an open container is dropped. The game's valid actions
    # also name what is inside closed containers, and playing those answers "No known action matches that input"
    gate1_target_unseen: bool = True
    # what decides "unseen" when the room text does not name an object: "tree" (the game's object tree: an object on
    # or in open things at any depth is within reach, only one inside a closed container is unseen; the room text
    # lists contents only so deep, and a block on a plane standing on another plane was dropped though the game took
    # the move) or "text" (the room and inventory text alone: the earlier rule)
    gate1_unseen_by: str = "tree"
    # what counts against a task's FOCUS_LIMIT: "rewarded" (a `focus on` the game took without a reward, the episode
    # going on, does not count, beyond those the task's own gold paths take unrewarded: on train variations a wrong
    # focus in grow-plant neither ends the episode nor stops the right focus from earning full marks) or "taken"
    # (every focus the game took: the earlier rule, which then dropped the task's right focus as one too many)
    focus_limit_counts: str = "rewarded"
    # a `focus on` an object the episode already focused on is dropped (FOCUS_REPEAT): on train gold paths a repeated
    # focus ended the episode at -100 in the 7 of 20 tasks that ask for two focuses and changed nothing in the others
    gate1_focus_repeat: bool = True
    # after Swift's first choice was dropped as FOCUS_REPEAT (it meant to focus, on the object already focused), its
    # second-ranked candidate, a `focus on` another object, is checked as a first choice would be, not dropped as
    # FALLBACK_FOCUS (off: no lower-ranked focus is ever played)
    gate1_focus_after_repeat: bool = False
    # --- stagnation detector: after every step, over the last `stagnation_window` steps
    stagnation_window: int = 5
    stagnation_min_steps: int = 5  # no report before this many steps
    same_observation_threshold: int = 3  # SAME_OBS_3: one observation this often, no reward
    repeat_action_threshold: int = 2  # REPEAT_ACTION_2_NO_EFFECT: same action + same observation this often
    repeat_verb_threshold: int = 3  # REPEAT_VERB_3_NO_EFFECT: same verb this often in a row, state unchanged
    move_spam_moves: int = 4  # MOVE_SPAM_4_OF_5: at least this many moves in the window ...
    move_spam_max_states: int = 2  # ... visiting at most this many distinct (room, inventory) states
    repeated_invalid_threshold: int = 3  # INVALID_REPEAT_3: this many invalid actions in the window
    stagnation_refire_steps: int = 3  # no second report within this many steps of the last one
    # the window restarts after a positive reward or a report: evidence from before progress, or already reported,
    # is not counted again (off: the earlier rule, where a report could re-fire on steps before a reward)
    stagnation_restart: bool = True
    # verbs that only observe are never on the avoid list: looking again is how an agent checks
    never_avoid_verbs: tuple[str, ...] = ("look at", "look in", "look around", "read", "inventory", "task")
    # waiting is how processes progress (water heats, plants grow): the same "You decide to wait" is no loop
    stagnation_ignore_verbs: tuple[str, ...] = ("wait", "wait1")
    # verbs that only observe: repeating them while a device runs (or a reading is taken) is monitoring
    observe_verbs: tuple[str, ...] = ("look at", "look in", "read", "use")
    # observations that say an action changed nothing (REPEAT_VERB counts only such steps, or identical ones)
    no_effect_phrases: tuple[str, ...] = ("already", "can't", "cannot", "nothing happens", "not possible",
                                          "No known action", "Unknown action", "doesn't", "is not", "empty")
    # --- the bounded Critic: only on a stagnation report
    critic_enabled: bool = True
    critic_budget: int = 3  # Critic calls per episode (6 in the sensitivity variant)
    critic_max_actions: int = 5  # actions the Critic may put into the buffer
    critic_cooldown_steps: int = 5  # steps between two Critic calls
    critic_report_ttl_steps: int = 2  # a report not served within this many steps expires
    critic_repeat_backoff_steps: int = 10  # after an answer that only repeats recent actions
    critic_repeat_window: int = 3  # "recent" for that check: the last 3 actions
    critic_max_moves: int = 1  # at most one move among the Critic's actions
    # the Critic's prompt: its last steps (each observation clipped) and valid actions (ranked, most relevant first).
    # 6 / 100 / 20: 780 tokens in the boil kitchen against 1,000 with 10 / 150 / 40 (prompts of ~1,160 tokens timed
    # out at 120 s five times in an evaluation on 2 cores)
    critic_history_k: int = 6
    critic_obs_chars: int = 100
    critic_valid_list_max: int = 20
    # their order: "ranked" (Swift's ranking first, then similarity to the task and to the plan, objects in
    # view before objects out of sight) or "game" (shared words with the task, then the game's order: the
    # earlier rule, which listed five near-identical 'dunk cup ...' lines first)
    critic_valid_order: str = "ranked"
    critic_max_tokens: int = 220
    critic_wait_for_empty_buffer: bool = True  # the Critic runs only when the action buffer is empty
    # replace | append: what the Critic's actions do to the buffer (docs/CONFIGURATION.md says why replace)
    critic_buffer_policy: str = "replace"
    # --- Swift's loop guard (stagnation control inside Swift's decoding)
    loop_guard: bool = True  # skip a best action that continues a room bounce or a no-news streak
    loop_guard_streak: int = 10  # identical action + observation without reward this often = a streak
    # The guard also when Sage is on. Off by default: with an LLM, a loop is SwiftSage's `stuck` trigger's and the
    # stagnation detector's to break (a model then chooses the way out), not a rule's. The guard's replacement is
    # Swift's next-ranked action, chosen by no one: on 90 test episodes without an LLM (where it stays on, the only
    # way out) it decided 39 paired episodes, 3 better, 4 worse, -72 points in all
    loop_guard_with_sage: bool = False


@dataclass
class EvalConfig:
    """Evaluation protocol (docs/AGENT.md §8)."""

    split: str = "test"
    variations_per_task: int = 10  # first 10 test variations of each task (271 episodes)
    short_max_gold_len: int = 20  # Short <= 20
    medium_max_gold_len: int = 50  # Medium 21-50, Long > 50
