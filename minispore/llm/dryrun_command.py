"""`minispore dryrun`: DryRun a LLaMA preset from the command line.

    minispore dryrun --model llama-7b --batch 1 --seq 2048                  # forward, on this CPU
    minispore dryrun --model llama-7b --batch 1 --seq 2048 --train --device ascend910b --plot mem.png
    minispore dryrun --model llama-13b --seq 4096 --dtype bfloat16 --device h100 --json report.json
    minispore dryrun --model llama-7b --dp 8 --tp 8 --zero level1 --dtype bfloat16   # a parallel strategy
    minispore dryrun --model llama-70b --world 1024 --tp 8 --pp 8 --vpp 2 --micro-batches 32 \
        --seq-parallel --multi-copy 2 --zero level1 --recompute selective --dtype bfloat16 --seq 4096
    minispore dryrun --model mixtral-8x7b --world 256 --tp 4 --ep 8 --seq-parallel --dtype bfloat16
    minispore dryrun --model llama-70b --world 1024 --search --plot strategies.png     # which fits, how fast

With any parallel flag (--dp, --tp, --pp, --world, --vpp, --ep, --zero, --seq-parallel, ...) the
command plans a distributed training step instead (minispore.llm.parallel_plan): per-rank memory
of parameters, gradients, optimizer state and activations, per-step communication by collective
and link class, bubble, step time and MFU, from formulas - for any number of devices, in
milliseconds, nothing is built. `--search` plans every dp x tp x pp x ZeRO x recompute
factorization of --world (minispore.llm.strategy_search) and ranks them.

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

import argparse
import os
import tempfile
import time

from .cli_commands import path_arg


def add_dryrun_args(parser):
    from ..graph.dryrun.devices import available_devices
    from .config import PRESETS
    from .moe_plan import DRYRUN_MODELS
    parser.add_argument("--model", default="llama-7b", choices=sorted(set(PRESETS) | set(DRYRUN_MODELS)),
                        help="LLaMA preset to analyse (default: llama-7b); "
                             f"{', '.join(sorted(DRYRUN_MODELS))}: MoE geometries for the parallel plan only")
    parser.add_argument("--batch", "--batch-size", dest="batch", type=int, default=1,
                        help="batch size (default: 1); with a parallel strategy, the micro-batch size per "
                             "data-parallel rank")
    parser.add_argument("--seq", type=int, default=None,
                        help="sequence length (default: the preset's max_seq_len)")
    parser.add_argument("--train", action="store_true",
                        help="a training step: forward + backward + AdamW (default: forward only)")
    parser.add_argument("--device", default=None,
                        help=f"device profile: one of {', '.join(available_devices())} (default: cpu, "
                             f"calibrated on this machine; h100 with a parallel strategy), or a JSON file "
                             f"of DeviceProfile fields")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="parameter and activation dtype (default: float32; with --search, mixed precision: "
                             "bfloat16 compute and weights, float32 gradients, unless --dtype/--param-dtype/"
                             "--grad-dtype say otherwise)")
    parser.add_argument("--plot", metavar="FILE", default=None, type=path_arg,
                        help="save the memory timeline plot (PNG/SVG)")
    parser.add_argument("--json", metavar="FILE", default=None, type=path_arg,
                        help="write the report as JSON (with one record per node: memory, FLOPs, time)")
    parser.add_argument("--top", type=int, default=15, help="rows of the per-op table (default: 15)")
    add_parallel_args(parser)


def add_parallel_args(parser):
    """The strategy flags (MindFormers' parallel_config names in the help); any of them switches
    the command to the analytic parallel plan."""
    from .parallel_plan import ATTENTION_KINDS, OPTIMIZER_LEVELS, RECOMPUTE_MODES
    g = parser.add_argument_group("parallel strategy (plan a distributed training step; see parallel_plan.py)")
    g.add_argument("--dp", type=int, default=None, help="data_parallel (default: world size / (tp * pp), else 1)")
    g.add_argument("--tp", type=int, default=None, help="model_parallel: tensor-parallel size (default: 1)")
    g.add_argument("--pp", type=int, default=None, help="pipeline_stage: pipeline stages (default: 1)")
    g.add_argument("--micro-batches", type=int, default=None, help="micro_batch_num per step (default: 1)")
    g.add_argument("--world-size", "--world", dest="world_size", type=int, default=None,
                   help="devices; must equal dp * tp * pp (with --search: the world to factorize)")
    g.add_argument("--vpp", type=int, default=None,
                   help="virtual pipeline stages: model chunks per device, interleaved 1F1B (MindSpore "
                        "pipeline_interleave; default: 1); needs --micro-batches a multiple of --pp")
    g.add_argument("--ep", type=int, default=None,
                   help="expert_parallel: ranks the MoE experts are spread over, dividing --dp (default: 1)")
    g.add_argument("--experts", type=int, default=None,
                   help="make the model's feed-forwards MoE with this many SwiGLU experts (default: the model's own)")
    g.add_argument("--top-k", type=int, default=None, help="with an MoE model: experts per token (default: 2)")
    g.add_argument("--capacity-factor", type=float, default=None,
                   help="with an MoE model: expert capacity factor (default: none, no token dropped or padded)")
    g.add_argument("--multi-copy", type=int, default=None,
                   help="fine_grain_interleave: copies each TP layer is split into so one copy's TP communication "
                        "overlaps the other's compute (needs --tp > 1 and --seq-parallel; default: 1)")
    g.add_argument("--efficiency", type=float, default=None,
                   help="fraction of the device's matmul peak the compute reaches (default: 1, a lower bound on "
                        "time); MFU is always against the peak")
    g.add_argument("--search", action="store_true", default=None,
                   help="with --world N: plan every dp x tp x pp x --zero x --recompute factorization and print "
                        "which fit and how fast (--plot FILE draws memory vs MFU; --top rows)")
    g.add_argument("--global-batch", type=int, default=None,
                   help="with --search: sequences per step (default: the world size); m = global batch / (dp x "
                        "--batch)")
    g.add_argument("--seq-parallel", action="store_true", default=None,
                   help="use_seq_parallel: norm/residual regions split along the sequence")
    g.add_argument("--sp-keep-gathered", action="store_true", default=None,
                   help="under --seq-parallel, keep the all-gathered GEMM inputs for backward (as an autodiff "
                        "tape does) instead of re-gathering them (Megatron, the default)")
    g.add_argument("--vocab-emb-dp", action=argparse.BooleanOptionalAction, default=None,
                   help="vocab_emb_dp: embedding and head replicated over TP (default); "
                        "--no-vocab-emb-dp: vocabulary-parallel embedding, head and cross-entropy")
    g.add_argument("--zero", default=None, choices=OPTIMIZER_LEVELS,
                   help="optimizer parallel level: level1 optimizer state, level2 + gradients, level3 + parameters")
    g.add_argument("--zero-threshold", type=float, default=None,
                   help="parallel_optimizer_threshold in KB: smaller parameters are not sharded (default: 64)")
    g.add_argument("--recompute", default=None, choices=RECOMPUTE_MODES, help="activation recomputation (default: none)")
    g.add_argument("--attention", default=None, choices=ATTENTION_KINDS,
                   help="what the attention core saves for backward (default: naive)")
    g.add_argument("--param-dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="stored weights (default: float32; 16-bit adds a float32 master copy to AdamW's state)")
    g.add_argument("--grad-dtype", default=None, choices=("float32", "bfloat16", "float16"),
                   help="gradients and their reductions (default: the parameter dtype)")
    g.add_argument("--intra-bw", type=float, default=None, help="GB/s per device inside a node (default: 200)")
    g.add_argument("--inter-bw", type=float, default=None, help="GB/s per device between nodes (default: 25)")
    g.add_argument("--latency", type=float, default=None, help="microseconds per ring step (default: 10)")
    g.add_argument("--devices-per-node", type=int, default=None, help="devices per node (default: 8)")
    g.add_argument("--minispore-step", action="store_true", default=None,
                   help="also list the collectives of minispore's own training step (llm/tensor_parallel.py, "
                        "DistributedGradReducer, ParallelOptimizer) for one rank: what ops.prims.comm.comm_bytes() "
                        "counts when it runs (dp x tp, no pipeline)")
    g.add_argument("--rank", type=int, default=None, help="with --minispore-step: the rank to list (default: 0)")
    g.add_argument("--bucket-mb", type=float, default=None,
                   help="with --minispore-step: DistributedGradReducer's bucket size in MB (default: 64, 'auto')")


_PARALLEL_FLAGS = ("dp", "tp", "pp", "micro_batches", "world_size", "seq_parallel", "sp_keep_gathered",
                   "vocab_emb_dp", "zero",
                   "zero_threshold", "recompute", "attention", "param_dtype", "grad_dtype", "intra_bw",
                   "inter_bw", "latency", "devices_per_node", "minispore_step", "rank", "bucket_mb",
                   "vpp", "ep", "experts", "top_k", "capacity_factor", "multi_copy", "efficiency", "search",
                   "global_batch")


def wants_parallel_plan(args) -> bool:
    from .moe_plan import DRYRUN_MODELS
    return getattr(args, "model", None) in DRYRUN_MODELS or \
        any(getattr(args, f, None) is not None for f in _PARALLEL_FLAGS)


def _moe_from_args(args, moe):
    """The model's MoE spec, or the one --experts / --top-k / --capacity-factor describe."""
    from ..common.errors import OpValueError
    from .moe_plan import MoESpec
    if args.experts is not None:
        return MoESpec(args.experts, args.top_k or 2, args.capacity_factor)
    if moe is None:
        if args.top_k is not None or args.capacity_factor is not None:
            raise OpValueError("dryrun", "--top-k / --capacity-factor with an MoE model (--experts N)",
                               f"them on the dense {args.model}")
        return None
    return MoESpec(moe.num_experts, args.top_k or moe.top_k,
                   moe.capacity_factor if args.capacity_factor is None else args.capacity_factor)


def _positive_flag(flag, v, allow_zero=False):
    from ..common.errors import OpValueError
    if v is not None and not (v > 0 or (allow_zero and v == 0)):
        raise OpValueError("dryrun", f"{flag} {'>= 0' if allow_zero else '> 0'}", str(v))
    return v


def run_parallel_plan(args) -> int:
    """`minispore dryrun` with a parallel strategy: the analytic plan of parallel_plan.py (or, with
    --search, every factorization of --world: strategy_search.py)."""
    import json
    from ..common.errors import OpValueError
    from .comm_cost import LinkModel
    from .moe_plan import dryrun_model
    from .parallel_plan import ParallelStrategy, Precision, plan_parallel

    t0 = time.perf_counter()
    if args.plot and not args.search:
        raise OpValueError("dryrun", "--plot with a parallel strategy only together with --search (the strategy "
                                     "plot; there is no timeline: nothing is captured)", f"--plot {args.plot}")
    if args.plot:
        check_output_file(args.plot, "--plot")
        _check_plotting(args.plot)
    if args.json:
        check_output_file(args.json, "--json")
    if args.batch <= 0:
        raise OpValueError("dryrun", "--batch >= 1", str(args.batch))
    tp, pp = args.tp or 1, args.pp or 1
    for flag, v in (("--tp", args.tp), ("--pp", args.pp), ("--dp", args.dp), ("--micro-batches", args.micro_batches),
                    ("--world-size", args.world_size), ("--devices-per-node", args.devices_per_node),
                    ("--intra-bw", args.intra_bw), ("--inter-bw", args.inter_bw), ("--vpp", args.vpp),
                    ("--ep", args.ep), ("--multi-copy", args.multi_copy), ("--experts", args.experts),
                    ("--top-k", args.top_k), ("--capacity-factor", args.capacity_factor),
                    ("--global-batch", args.global_batch), ("--efficiency", args.efficiency)):
        _positive_flag(flag, v)
    _positive_flag("--latency", args.latency, allow_zero=True)
    if args.search and args.dtype is None and args.param_dtype is None and args.grad_dtype is None:
        precision = Precision(compute_dtype="bfloat16", param_dtype="bfloat16", grad_dtype="float32")
    else:
        precision = Precision(compute_dtype=args.dtype or "float32", param_dtype=args.param_dtype or "float32",
                              grad_dtype=args.grad_dtype)
    d = LinkModel()
    links = LinkModel(intra_node_bw=d.intra_node_bw if args.intra_bw is None else args.intra_bw * 1e9,
                      inter_node_bw=d.inter_node_bw if args.inter_bw is None else args.inter_bw * 1e9,
                      latency_s=d.latency_s if args.latency is None else args.latency * 1e-6,
                      devices_per_node=args.devices_per_node or d.devices_per_node)
    from ..graph.dryrun.devices import get_device, load_profile
    device = load_profile(args.device) if args.device and os.path.isfile(args.device) else \
        get_device(args.device or "h100")
    cfg, moe = dryrun_model(args.model)
    moe = _moe_from_args(args, moe)
    if args.search:
        return _run_search(args, cfg, moe, precision, links, device, t0)
    if args.global_batch is not None:
        raise OpValueError("dryrun", "--global-batch together with --search", "it without --search")
    if args.dp is None:
        if args.world_size is None:
            dp = 1
        elif args.world_size % (tp * pp):
            raise OpValueError("dryrun", f"--world-size divisible by --tp x --pp = {tp * pp} (to derive --dp)",
                               f"--world-size {args.world_size}")
        else:
            dp = args.world_size // (tp * pp)
    else:
        dp = args.dp
    strategy = ParallelStrategy(
        data_parallel=dp, model_parallel=tp, pipeline_stage=pp, micro_batch_num=args.micro_batches or 1,
        use_seq_parallel=bool(args.seq_parallel), vocab_emb_dp=args.vocab_emb_dp is not False,
        optimizer_level=args.zero,
        parallel_optimizer_threshold=64 if args.zero_threshold is None else args.zero_threshold,
        recompute=args.recompute or "none", sp_regather=not args.sp_keep_gathered,
        virtual_pipeline_stages=args.vpp or 1, expert_parallel=args.ep or 1, fine_grain_interleave=args.multi_copy or 1)
    plan = plan_parallel(cfg, strategy, batch_size=args.batch, seq_len=args.seq, precision=precision,
                         attention=args.attention or "naive", world_size=args.world_size, links=links,
                         device=device, model=args.model, moe=moe, efficiency=args.efficiency or 1.0)
    print(plan.table())
    if args.minispore_step:
        print()
        print(minispore_step_table(cfg, strategy, args.batch, plan.seq_len, precision.param_dtype,
                                   args.rank or 0, args.bucket_mb))
    elif args.rank is not None or args.bucket_mb is not None:
        raise OpValueError("dryrun", "--rank / --bucket-mb together with --minispore-step", "them without it")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(plan.to_dict(), f, indent=1)
        print(f"plan written to {args.json}")
    print(f"\nplanned in {time.perf_counter() - t0:.3f} s (formulas only: nothing was built or run)")
    return 0


def _run_search(args, cfg, moe, precision, links, device, t0) -> int:
    """`--search`: strategy_search.search_strategies over --world, its table, --plot and --json."""
    import json
    from ..common.errors import OpValueError
    from .strategy_search import search_strategies
    given = [f for f, v in (("--dp", args.dp), ("--tp", args.tp), ("--pp", args.pp),
                            ("--micro-batches", args.micro_batches), ("--vpp", args.vpp), ("--minispore-step",
                                                                                          args.minispore_step))
             if v is not None]
    if given:
        raise OpValueError("dryrun", "--search without " + ", ".join(given) + " (it enumerates dp x tp x pp and "
                                     "derives the micro-batches from --global-batch)", " ".join(given))
    if args.world_size is None:
        raise OpValueError("dryrun", "--search with --world N (the devices to factorize)", "no --world")
    result = search_strategies(
        cfg, args.world_size, device=device, seq_len=args.seq, global_batch=args.global_batch, micro_batch=args.batch,
        precision=precision, attention=args.attention or "flash", links=links, moe=moe, ep=args.ep or 1,
        multi_copy=args.multi_copy or 1,
        zero_levels=(args.zero,) if args.zero else (None, "level1", "level2", "level3"),
        recomputes=(args.recompute,) if args.recompute else ("none", "selective", "full"),
        efficiency=args.efficiency or 1.0, model=args.model)
    print(result.table(args.top))
    if args.plot:
        result.plot(args.plot)
        print(f"\nstrategy plot written to {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_dict(), f, indent=1)
        print(f"search written to {args.json}")
    print(f"\nsearched in {time.perf_counter() - t0:.2f} s (formulas only: nothing was built or run)")
    return 0


def minispore_step_table(cfg, strategy, batch, seq, dtype, rank=0, bucket_mb=None) -> str:
    """The `--minispore-step` section: parallel_plan.minispore_step_comm's rows and totals for one
    rank, in the counter's convention (payload = the buffer handed to MPI; ring = bytes sent)."""
    from .parallel_plan import _size, minispore_step_comm
    rows = minispore_step_comm(cfg, strategy, batch_size=batch, seq_len=seq, dtype=dtype, rank=rank,
                               bucket_mb=bucket_mb, by_purpose=True)
    totals = minispore_step_comm(cfg, strategy, batch_size=batch, seq_len=seq, dtype=dtype, rank=rank,
                                 bucket_mb=bucket_mb)
    lines = [f"minispore's own step, rank {rank} ({dtype} parameters; what comm_bytes() counts when it runs):",
             f"  {'group':<6} {'primitive':<15} {'calls':>7} {'payload':>11}  purpose"]
    merged = []                    # one row per run of buckets (a 7B model has ~70 of them)
    for g, prim, calls, payload, why in rows:
        kind = why.split(" bucket ")[0] if " bucket " in why else None
        if kind and merged and merged[-1][4] == kind and merged[-1][:2] == (g, prim):
            merged[-1] = (g, prim, merged[-1][2] + calls, merged[-1][3] + payload, kind)
        else:
            merged.append((g, prim, calls, payload, kind or why))
    lines += [f"  {g:<6} {prim:<15} {calls:>7} {_size(payload):>11}  {why}" + (" buckets" if " bucket " not in why
                                                                              and why.endswith("gradient") else "")
              for g, prim, calls, payload, why in merged]
    if not rows:
        lines.append("  (none: one rank)")
    lines.append("  totals: " + ", ".join(f"{k} {v['calls']} calls, payload {v['payload']:,} B, ring {v['ring']:,} B"
                                          for k, v in totals.items()))
    return "\n".join(lines)


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
    if wants_parallel_plan(args):
        return run_parallel_plan(args)
    args.dtype = args.dtype or "float32"
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
    args.device = args.device or "cpu"
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


__all__ = ["add_dryrun_args", "run_dryrun", "dryrun_host_bytes", "check_output_file", "add_parallel_args",
           "run_parallel_plan", "wants_parallel_plan", "minispore_step_table"]
