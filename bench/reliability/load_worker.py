"""The child process of the checkpoint fuzz: makes each mutant, loads it, says what happened.

    python -m bench.reliability.load_worker BASE_RUN SCRATCH SEED

reads lines "INDEX KIND" on stdin and answers each with one JSON line on stdout. It runs apart from
the harness (under an address-space limit the harness sets) because a load may block forever in a
system call, allocate without bound, or crash the interpreter; the harness then kills or restarts
it and still knows which mutant did it.

The loading paths are the public ones:

* `manager`: `CheckpointManager(run).load("latest", net, optimizer, config=..., sampler=...)`,
  what `minispore train --resume` does;
* `generate`: `load_for_generation(run)`, what `minispore generate --ckpt` does;
* `load_checkpoint`: `minispore.load_checkpoint(weights, format="safetensors", crc_check=True)`.

The original values come from the pristine files, read with the `safetensors` package and `json`
(not with the code under test). Before every `manager` load the net, the optimizer, the sampler
and the RNG are set to sentinel values, so a load that fails can be checked to have changed
nothing (the documented all-or-nothing promise) and one that succeeds to have restored exactly the
original values.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import traceback
import warnings

import numpy as np

from . import mutants
from . import outcomes as oc
from .alarm import Timeout, time_limit

LOAD_TIMEOUT_S = 10.0
KEEP_FAILURES = 40


def _plain(obj):
    return json.loads(json.dumps(obj, allow_nan=True))


class Loader:
    """The loading paths and the original values, built once per worker."""

    def __init__(self, base_run: str, scratch: str, seed: int):
        from minispore.common import context
        from minispore.dataset import BatchSampler
        from minispore.llm import Llama, LlamaConfig
        from minispore.llm.trainer import TrainConfig, build_optimizer, prepare_data
        from safetensors.numpy import load_file

        self.context = context
        self.base_run, self.scratch, self.seed = base_run, scratch, seed
        self.run_dir = os.path.join(scratch, "run")
        self.outside = os.path.join(scratch, "outside")
        self.kept_dir = os.path.join(scratch, "failures")
        os.makedirs(os.path.join(self.outside, "pristine"), exist_ok=True)
        os.makedirs(self.kept_dir, exist_ok=True)
        ckpt = mutants.ckpt_dir(base_run)
        for name in (mutants.MODEL, mutants.STATE):
            shutil.copyfile(os.path.join(ckpt, name), os.path.join(self.outside, "pristine", name))
        shutil.copyfile(os.path.join(base_run, mutants.LATEST), os.path.join(self.outside, "pristine", mutants.LATEST))

        self.tensors = load_file(os.path.join(ckpt, mutants.MODEL))
        with open(os.path.join(ckpt, mutants.STATE), encoding="utf-8") as f:
            self.state = json.load(f)
        config = self.state["config"]
        self.run_config = config
        model_config = LlamaConfig.from_dict(config["model"])
        train = {k: v for k, v in config["train"].items() if k in TrainConfig.__dataclass_fields__}
        tc = TrainConfig(out_dir=self.run_dir, progress=False, plot=False, **train)
        self.net = Llama(model_config)
        self.optimizer, _ = build_optimizer(self.net, tc)
        _, train_ids, _ = prepare_data()
        sampler_state = self.state["sampler_state"]
        self.sampler = BatchSampler(train_ids, sampler_state["batch_size"], sampler_state["block_size"], seed=1)
        self.sentinel_sampler = _plain(self.sampler.state_dict())
        seen, self.params = set(), []
        for cell in (self.net, self.optimizer):
            for _, p in cell.parameters_and_names():
                if id(p) not in seen:
                    seen.add(id(p))
                    self.params.append(p)
        self.kept = 0

    # -- the sentinel state, and comparisons ------------------------------------------------------
    def _reset(self):
        from minispore.common.tensor import Tensor
        for p in self.params:
            p.set_data(Tensor(np.zeros(p.shape, dtype=p.asnumpy().dtype)))
        self.sampler.load_state_dict(self.sentinel_sampler)
        self.context.set_seed(12345)
        return _plain(self.context.get_rng_state())

    def _params_equal_original(self, params) -> list[str]:
        wrong = []
        for name, p in params:
            want = self.tensors.get(name)
            got = p.asnumpy()
            if want is None or got.dtype != want.dtype or got.shape != want.shape or got.tobytes() != want.tobytes():
                wrong.append(name)
        return wrong

    def _params_still_sentinel(self) -> list[str]:
        return [p.name for p in self.params if np.any(p.asnumpy() != 0)]

    # -- one mutant ---------------------------------------------------------------------------------
    def run_one(self, index: int, kind: str) -> dict:
        mutants.copy_run(self.base_run, self.run_dir)
        m = mutants.make_mutant(index, kind, self.seed, self.run_dir, self.outside)
        result = {"index": index, "kind": kind, "what": m.what, "path": m.path}
        rng_before = self._reset() if m.path == "manager" else None
        loaded = None
        try:
            with warnings.catch_warnings(), time_limit(LOAD_TIMEOUT_S):
                warnings.simplefilter("ignore")
                loaded = self._load(m.path)
        except Timeout:
            result.update(outcome=oc.HANG, detail=f"the load ran past {LOAD_TIMEOUT_S:.0f} s")
        except BaseException as e:          # noqa: BLE001 - classifying every exception is the point
            from minispore.common.errors import MinisporeError
            if isinstance(e, MinisporeError):
                result.update(outcome=oc.CLEAN, detail=f"{type(e).__name__}: {str(e)[:200]}")
                if m.path == "manager":
                    changed = self._changed_by_failed_load(rng_before)
                    if changed:
                        result.update(outcome=oc.WRONG, detail=f"the load failed ({type(e).__name__}: "
                                      f"{str(e)[:120]}) but changed {changed}")
            else:
                tb = traceback.extract_tb(e.__traceback__)
                where = f" at {os.path.basename(tb[-1].filename)}:{tb[-1].lineno}" if tb else ""
                result.update(outcome=oc.RAW, detail=f"{type(e).__name__}: {str(e)[:200]}{where}")
        else:
            differs = self._differences(m.path, loaded)
            if not differs:
                result.update(outcome=oc.OK, detail="loaded; every value equals the original")
            elif m.legal:
                result.update(outcome=oc.OK, detail=f"loaded a legal change ({differs})")
            else:
                result.update(outcome=oc.WRONG, detail=f"loaded without an error, but {differs}")
        if result["outcome"] in oc.FAILURES and self.kept < KEEP_FAILURES:
            self.kept += 1
            dest = os.path.join(self.kept_dir, f"{index:05d}")
            _safe_copy(self.run_dir, dest)
            result["kept"] = dest
        return result

    def _load(self, path: str):
        if path == "manager":
            from minispore.train.checkpoint_manager import CheckpointManager
            return CheckpointManager(self.run_dir, create=False).load(
                "latest", self.net, self.optimizer, config=self.run_config, sampler=self.sampler)
        if path == "generate":
            from minispore.llm.cli_commands import load_for_generation
            return load_for_generation(self.run_dir)
        import minispore as ms
        weights = os.path.join(mutants.ckpt_dir(self.run_dir), mutants.MODEL)
        return ms.load_checkpoint(weights, format="safetensors", crc_check=True)

    def _changed_by_failed_load(self, rng_before) -> str:
        changed = []
        still = self._params_still_sentinel()
        if still:
            changed.append(f"{len(still)} parameters ({', '.join(still[:3])})")
        if _plain(self.sampler.state_dict()) != self.sentinel_sampler:
            changed.append("the sampler")
        if _plain(self.context.get_rng_state()) != rng_before:
            changed.append("the global RNG")
        return ", ".join(changed)

    def _differences(self, path: str, loaded) -> str:
        """'' when what the load produced equals the original checkpoint, else what differs."""
        out = []
        if path == "manager":
            wrong = self._params_equal_original([(p.name, p) for p in self.params])
            if wrong:
                out.append(f"{len(wrong)} parameters differ ({', '.join(wrong[:3])})")
            if _plain(self.sampler.state_dict()) != _plain(self.state["sampler_state"]):
                out.append("the sampler state differs")
            if _plain(self.context.get_rng_state()) != _plain(self.state["rng_state"]):
                out.append("the RNG state differs")
            want_extra = {**self.state["extra_state"], "step": self.state["step"]}
            if _plain(loaded) != _plain(want_extra):
                keys = sorted(k for k in set(want_extra) | set(loaded or {})
                              if _plain((loaded or {}).get(k)) != _plain(want_extra.get(k)))
                out.append(f"the returned state differs in {keys[:4]}")
        elif path == "generate":
            model, tokenizer = loaded
            wrong = self._params_equal_original(list(model.parameters_and_names()))
            if wrong:
                out.append(f"{len(wrong)} weights differ ({', '.join(wrong[:3])})")
            if _plain(model.config.to_dict()) != _plain(self.state["config"]["model"]):
                out.append("the model config differs")
            if _plain(tokenizer.to_dict()) != _plain(self.state["config"]["tokenizer"]):
                out.append("the tokenizer differs")
        else:
            names = set(loaded)
            if names != set(self.tensors):
                out.append(f"the names differ ({sorted(names ^ set(self.tensors))[:3]})")
            wrong = [n for n in names & set(self.tensors) if isinstance(loaded[n], str) or
                     self._params_equal_original([(n, loaded[n])])]
            if wrong:
                out.append(f"{len(wrong)} tensors differ ({', '.join(sorted(wrong)[:3])})")
        return "; ".join(out)


def _safe_copy(src: str, dest: str) -> None:
    """Copy a mutated run for later inspection without ever opening a FIFO or reading a device."""
    os.makedirs(dest, exist_ok=True)
    for name in os.listdir(src):
        s, d = os.path.join(src, name), os.path.join(dest, name)
        st = os.lstat(s)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(s), d)
        elif stat.S_ISDIR(st.st_mode):
            _safe_copy(s, d)
        elif stat.S_ISFIFO(st.st_mode):
            os.mkfifo(d)
        elif stat.S_ISREG(st.st_mode) and st.st_size <= 16 << 20:
            shutil.copyfile(s, d)
        else:
            with open(d + ".what", "w") as f:
                f.write(f"not copied: mode {oct(st.st_mode)}, {st.st_size} bytes\n")


def main(argv=None) -> int:
    base_run, scratch, seed = (argv or sys.argv[1:])[:3]
    loader = Loader(base_run, scratch, int(seed))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        index, kind = line.rstrip("\n").split(" ", 1)
        print(json.dumps(loader.run_one(int(index), kind)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
