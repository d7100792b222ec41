"""`minispore dryrun`: DryRun a LLaMA preset from the command line.

    minispore dryrun --model llama-7b --batch 1 --seq 2048                  # forward, on this CPU
    minispore dryrun --model llama-7b --batch 1 --seq 2048 --train --device ascend910b --plot mem.png
    minispore dryrun --model llama-13b --seq 4096 --dtype bfloat16 --device h100 --json report.json

The model is built under `abstract_parameters()` (no weight memory), captured (forward, or
forward + backward + AdamW with `--train`), planned and costed; the report goes to stdout.

Nothing of the simulated job is allocated, but DryRun does materialize one thing whose size
follows the flags: the model's rotary-embedding tables, one row per position (`--seq 10**12`
would be petabytes). That, the `--plot` / `--json` destinations and the small flags are checked
before any work, so a mistake is one clear error instead of a MemoryError or a report that
prints and then fails to save.

This module is command-line glue: it lives with the LLaMA models (a layer above the graph
compiler) so that minispore.graph.dryrun itself never imports a model; it is imported only when
the `dryrun` command runs.
"""
from __future__ import annotations

import os
import tempfile
import time

from .cli_commands import path_arg


def add_dryrun_args(parser):
    from ..graph.dryrun.devices import available_devices
    from .config import PRESETS
    parser.add_argument("--model", default="llama-7b", choices=sorted(PRESETS),
                        help="LLaMA preset to analyse (default: llama-7b)")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default: 1)")
    parser.add_argument("--seq", type=int, default=None,
                        help="sequence length (default: the preset's max_seq_len)")
    parser.add_argument("--train", action="store_true",
                        help="a training step: forward + backward + AdamW (default: forward only)")
    parser.add_argument("--device", default="cpu",
                        help=f"device profile: one of {', '.join(available_devices())} (default: cpu, "
                             f"calibrated on this machine), or a JSON file of DeviceProfile fields")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16", "float16"),
                        help="parameter and activation dtype (default: float32)")
    parser.add_argument("--plot", metavar="FILE", default=None, type=path_arg,
                        help="save the memory timeline plot (PNG/SVG)")
    parser.add_argument("--json", metavar="FILE", default=None, type=path_arg,
                        help="write the report as JSON (with one record per node: memory, FLOPs, time)")
    parser.add_argument("--top", type=int, default=15, help="rows of the per-op table (default: 15)")


def dryrun_host_bytes(cfg, dtype) -> int:
    """Host bytes DryRun materializes for `Llama(cfg)` at `dtype`: weights and activations are
    abstract, so only the rotary tables (`max_seq_len` rows of `head_dim`, float64 and per-dtype
    copies) and the layers' Python objects - memory_estimate's numbers for both."""
    from .memory_estimate import object_bytes, rope_table_bytes
    return rope_table_bytes(cfg, dtype) + object_bytes(cfg)


def check_output_file(path, flag: str) -> None:
    """Refuse an output path the report could not be written to, before the (long) analysis:
    a directory, a file in a directory that does not exist or that this process cannot write."""
    from ..common.errors import OpValueError
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        problem = "which is a directory"
    elif not os.path.isdir(parent):
        problem = f"whose directory '{parent}' does not exist" if not os.path.lexists(parent) else \
            f"whose parent '{parent}' is not a directory"
    else:
        try:                 # permission bits do not tell (root, read-only mounts): try it
            fd, probe = tempfile.mkstemp(prefix=".minispore-write-test-", dir=parent)
        except OSError as e:
            problem = f"whose directory '{parent}' is not writable ({e.strerror})"
        else:
            os.close(fd)
            os.remove(probe)
            return
    raise OpValueError("dryrun", f"{flag} FILE in an existing, writable directory", f"'{path}', {problem}")


def _check_plotting(path) -> None:
    """--plot needs matplotlib and a format it can write (from the file extension)."""
    from ..common.errors import OpValueError, require
    require("matplotlib", "plot", "Plotting the memory timeline (--plot)")
    from matplotlib.backend_bases import FigureCanvasBase
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if ext and ext not in formats:
        raise OpValueError("dryrun", f"--plot FILE with an extension matplotlib writes ({', '.join(sorted(formats))})",
                           f"'{path}'")


def run_dryrun(args) -> int:
    from ..common import dtype as mstype
    from ..common.memory_limit import check_fits
    from ..common.errors import OpValueError
    from ..graph.dryrun import abstract_parameters, dryrun
    from ..graph.dryrun.devices import get_device, load_profile
    from .config import get_preset
    from .model import Llama

    t0 = time.perf_counter()
    if args.batch <= 0:
        raise OpValueError("dryrun", "--batch >= 1", str(args.batch))
    if args.top < 0:
        raise OpValueError("dryrun", "--top >= 0", str(args.top))
    cfg = get_preset(args.model).model
    seq = cfg.max_seq_len if args.seq is None else args.seq
    if seq <= 0:
        raise OpValueError("dryrun", "--seq >= 1", str(seq))
    cfg.max_seq_len = max(cfg.max_seq_len, seq)        # the RoPE tables must cover the sequence
    dtype = mstype.as_dtype(args.dtype)
    check_fits(dryrun_host_bytes(cfg, dtype), f"minispore dryrun --seq {seq}",
               hint=f"DryRun allocates no weights or activations, but it builds the rotary-embedding tables "
                    f"of every position ({seq:,} x head_dim {cfg.head_dim}, several copies); lower --seq.")
    if args.plot:
        check_output_file(args.plot, "--plot")
        _check_plotting(args.plot)
    if args.json:
        check_output_file(args.json, "--json")
    device = load_profile(args.device) if os.path.isfile(args.device) else get_device(args.device)
    with abstract_parameters(dtype=None if dtype is mstype.float32 else dtype):
        model = Llama(cfg)
    tokens = ((args.batch, seq), mstype.int64)
    name = f"{args.model} {'train step' if args.train else 'forward'} (batch {args.batch}, seq {seq}, {args.dtype})"
    if args.train:
        report = dryrun(model.loss, tokens, tokens, train=True, device=device, name=name)
    else:
        report = dryrun(model, tokens, device=device, name=name)
    print(report.summary())
    print(f"\nPer op (top {args.top} by predicted time):")
    print(report.table(args.top))
    if args.plot:
        report.plot(args.plot)
        print(f"\nmemory timeline written to {args.plot}")
    if args.json:
        report.to_json(args.json, include_nodes=True)
        print(f"report written to {args.json}")
    print(f"\ndryrun took {time.perf_counter() - t0:.2f} s (no kernel ran, no weight memory was allocated)")
    return 0


__all__ = ["add_dryrun_args", "run_dryrun", "dryrun_host_bytes", "check_output_file"]
