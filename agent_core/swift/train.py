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

from .batches import _autocast, batch_tensors, collate, evaluate, length_batches  # noqa: F401 - re-exported
from .data import MAX_SAME_TARGET, build_pairs  # noqa: F401 - MAX_SAME_TARGET re-exported
# the builders come through .model (where tests/marks.py watches them); batching and the card have their own modules
from .model import (action_key, build_minilm_seq2seq, build_t5, freeze_encoder_layers, input_rows,  # noqa: F401
                    is_minilm, load_seq2seq, pad_rows, target_ids, train_tokenizer)
from .model_card import (  # noqa: F401 - re-exported
    describe_architecture,
    model_description,
    plot_curve,
    runs_text,
    write_model_card,
)

ROOT = Path(__file__).resolve().parents[2]


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
