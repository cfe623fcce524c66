"""Train within one time-boxed GPU run (docs/contributors/timeboxed-gpu-runs.md; memorag/training/timeboxed.py).

On this machine:
    python train/timeboxed.py pack-base --out runs/timeboxed/out            # base.part00..03 + manifest (about 97 MB)
    python train/timeboxed.py pack-data --out runs/timeboxed/out runs/data/mix/mix_train.jsonl ...
On the device, one command each (carrying the parts named):
    python train/timeboxed.py receive --from runs/timeboxed/out
    python train/timeboxed.py assemble
    python train/timeboxed.py start --pretrain-config C1 --sft-config C2 --pretrain-seconds 1080 --sft-seconds 240
        [--sft-set loss.kind=mix] [--control-stage1]      # a setting for one stage; stage 1's control too
    python train/timeboxed.py wait --seconds 540
    python train/timeboxed.py export --out $OUT
Back here:
    python train/timeboxed.py unpack --from DIR --to runs/timeboxed-back
`--device cpu` runs the same on a CPU; `--folder` (default runs/timeboxed) is where a run keeps its state.
"""

import argparse
import json
import sys
import tempfile
from pathlib import Path

from memorag.training import timeboxed
from memorag.training.parts import MIB, bundle, unbundle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    pack_base = commands.add_parser("pack-base", help="the embedded base's compact exact form, in parts")
    pack_base.add_argument("--out", required=True)
    pack_base.add_argument("--part-mib", type=float, default=24.0, help="two parts and the tree fit in 64 MiB")
    pack_data = commands.add_parser("pack-data", help="training and held-out files (xz), in parts")
    pack_data.add_argument("--out", required=True)
    pack_data.add_argument("--part-mib", type=float, default=24.0)
    pack_data.add_argument("files", nargs="+", help="paths relative to the working tree, extracted there as they are")
    for name in ("receive", "assemble", "start", "drive", "wait", "stop", "export"):
        sub = commands.add_parser(name)
        sub.add_argument("--folder", default="runs/timeboxed",
                         help="the run's state (persists while the machine is held)")
        if name == "receive":
            sub.add_argument("--from", dest="source", required=True, help="the carried folder of parts")
        if name == "start":
            sub.add_argument("--pretrain-config", required=True)
            sub.add_argument("--sft-config", required=True)
            sub.add_argument("--pretrain-seconds", type=float, required=True)
            sub.add_argument("--sft-seconds", type=float, required=True)
            sub.add_argument("--checkpoint-seconds", type=float, default=180.0)
            sub.add_argument("--eval-ratios", type=int, nargs="+", default=[2, 4, 8])
            sub.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
            sub.add_argument("--pretrain-set", action="append", default=[], metavar="KEY=VALUE",
                             help="a setting for stage 1 only (repeat for more)")
            sub.add_argument("--sft-set", action="append", default=[], metavar="KEY=VALUE",
                             help="a setting for clue SFT only (repeat for more)")
            sub.add_argument("--control-stage1", action="store_true",
                             help="also the held-out control of stage 1's checkpoint, beside SFT "
                                  "(eval/control-pretrain.json)")
            sub.add_argument("overrides", nargs="*", help="key=value for both stages and the control")
        if name == "wait":
            sub.add_argument("--seconds", type=float, default=540.0, help="stay under the 10-minute command limit")
            sub.add_argument("--every", type=float, default=60.0)
        if name == "export":
            sub.add_argument("--out", required=True, help="$OUT on the device")
            sub.add_argument("--no-checkpoints", action="store_true", help="weights and logs only, no resumable state")
    unpack = commands.add_parser("unpack", help="here: check and extract what an export brought back")
    unpack.add_argument("--from", dest="source", required=True, nargs="+")
    unpack.add_argument("--to", required=True)
    args = parser.parse_args()

    if args.command == "pack-base":
        from memorag.runtime.embedded import embedded_smollm2_dir, smollm2_gguf_path
        from memorag.training.base_pack import pack_base

        with tempfile.TemporaryDirectory() as staging:
            packed = pack_base(smollm2_gguf_path(), embedded_smollm2_dir(), staging)
            files = {p.name: p for p in packed.iterdir()}
            written = bundle(files, args.out, "base", int(args.part_mib * MIB), compress=False)
    elif args.command == "pack-data":
        written = bundle({f: Path(f) for f in args.files}, args.out, "data", int(args.part_mib * MIB))
    elif args.command == "receive":
        written = timeboxed.receive(args.source, args.folder)
    elif args.command == "assemble":
        print(json.dumps(timeboxed.assemble(args.folder)))
        return 0
    elif args.command == "start":
        plan = timeboxed.TimeboxedPlan(
            args.pretrain_config, args.sft_config, args.pretrain_seconds, args.sft_seconds, args.folder, args.device,
            args.eval_ratios, args.checkpoint_seconds, args.overrides, args.pretrain_set, args.sft_set,
            args.control_stage1)
        pid = timeboxed.start(plan)
        print(f"started the run in a new session, pid {pid}; follow it with `train/timeboxed.py wait`")
        return 0
    elif args.command == "drive":
        return timeboxed.drive(timeboxed.load_plan(args.folder))
    elif args.command == "wait":
        return 0 if timeboxed.wait(args.folder, args.seconds, args.every) else 3
    elif args.command == "stop":
        for stage in ("pretrain", "sft"):
            (Path(args.folder) / stage).mkdir(parents=True, exist_ok=True)
            (Path(args.folder) / stage / "STOP").touch()
        return 0
    elif args.command == "export":
        written = timeboxed.export(args.folder, args.out, checkpoints=not args.no_checkpoints)
    else:
        written = unbundle("results", args.source, args.to)
    for path in written:
        print(f"{path} ({Path(path).stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
