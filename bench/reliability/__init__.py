"""The reliability report's harness (issue 12); `bench/bench_reliability.py` runs it.

One module per job:

* `outcomes`       the categories a trial can end in (ok, clean error, raw traceback, hang, wrong
                   result, lost run), the worst-first rule, the Markdown table;
* `train_runs`     `minispore train` as a child process; checkpoints read back with `safetensors`;
* `signal_trials`  kill -9 inside a save, SIGTERM, SIGHUP, double SIGINT; resume; bit-exact check;
* `mutants`        damaged and hostile copies of a real checkpoint, reproducible from (seed, index);
* `load_worker`    the child process that loads each mutant through a public path and compares;
* `mutation_fuzz`  drives the worker, with a wall-clock limit and restarts after a crash;
* `alarm`          SIGALRM time limits for in-process work;
* `op_fuzz_run`    `minispore.testing.op_fuzz.fuzz_ops` in child processes, as a report row;
* `report`         all of it together.
"""
