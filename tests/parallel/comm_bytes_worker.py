"""One rank of tests/parallel/test_comm_bytes.py and bench/bench_comm_bytes.py:

    mpiexec -n N python comm_bytes_worker.py OUT_DIR SCENARIO [SCENARIO ...]

A SCENARIO is `tp<T>dp<D>[,float32][,tied][,bucket=<MB>][,unfused][,overlap][,sp][,vocab_emb_dp]
[,zero=level<k>][,threshold=<KB>][,vocab=<V>]`, T * D = N (resume_worker.Run's options). For
each, the worker builds resume_worker's dp x tp LLaMA run (the LLaMA trainer's step), takes one
warm-up step, resets `ops.prims.comm.comm_bytes()`, takes one more step and records the
counters: every collective this process issued in that step (TP all-reduces of
parallel/megatron.py, the DP gradient buckets of nn.DistributedGradReducer). OUT_DIR/rank_<r>.json
gets {scenario: {"comm": comm_bytes(), "rank", "tp", "dp", "dtype", "tied", "bucket_mb", "fused",
"batch", "seq"}}; the test compares it with `parallel_plan.minispore_step_comm`.
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import minispore as ms  # noqa: E402
from minispore.common.auto_parallel_context import set_auto_parallel_context  # noqa: E402
from minispore.communication import get_rank, init  # noqa: E402
from minispore.ops.prims import comm  # noqa: E402

import resume_worker as rw  # noqa: E402


def parse(scenario):
    head, *opts = scenario.split(",")
    tp, dp = head[2:].split("dp")
    spec = {"tp": int(tp), "dp": int(dp), "dtype": "float64", "tied": False, "bucket_mb": None, "fused": True,
            "overlap": False, "seq_parallel": False, "vocab_emb_dp": False, "zero": None, "zero_threshold": 0.0,
            "vocab": 32}
    for o in opts:
        if o in ("float32", "float64"):
            spec["dtype"] = o
        elif o == "tied":
            spec["tied"] = True
        elif o == "unfused":
            spec["fused"] = False
        elif o == "overlap":
            spec["overlap"] = True
        elif o.startswith("vocab="):
            spec["vocab"] = int(o.split("=", 1)[1])
        elif o == "sp":
            spec["seq_parallel"] = True
        elif o == "vocab_emb_dp":
            spec["vocab_emb_dp"] = True
        elif o.startswith("zero="):
            spec["zero"] = o.split("=", 1)[1]
        elif o.startswith("threshold="):
            spec["zero_threshold"] = float(o.split("=", 1)[1])
        elif o.startswith("bucket="):
            spec["bucket_mb"] = float(o.split("=", 1)[1])
        else:
            raise SystemExit(f"unknown option {o!r} in {scenario!r}")
    return spec


def measure(spec):
    if spec["fused"]:
        mode = {"mode": "auto"} if spec["bucket_mb"] is None else {"mode": "size", "config": spec["bucket_mb"]}
        set_auto_parallel_context(comm_fusion={"openstate": True, "allreduce": mode})
    else:
        set_auto_parallel_context(comm_fusion={"openstate": False})
    run = rw.Run(spec["tp"], spec["dp"], cfg=rw.config(tie_embeddings=spec["tied"], vocab_size=spec["vocab"]),
                 dtype=getattr(ms, spec["dtype"]), overlap=spec["overlap"], seq_parallel=spec["seq_parallel"],
                 vocab_emb_dp=spec["vocab_emb_dp"], zero=spec["zero"], zero_threshold=spec["zero_threshold"])
    run.step()                            # warm-up: the first step is no different, but be sure
    comm.reset_comm_bytes()
    run.step()
    counted = comm.comm_bytes()
    set_auto_parallel_context(comm_fusion={"openstate": True, "allreduce": {"mode": "auto"}})
    return {"comm": counted, "rank": get_rank(), "batch": rw.GLOBAL_BATCH // spec["dp"], "seq": rw.SEQ, **spec}


def main():
    init()
    out_dir, scenarios = sys.argv[1], sys.argv[2:]
    result = {s: measure(parse(s)) for s in scenarios}
    Path(out_dir, f"rank_{get_rank()}.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
