"""The compile cache never hands a process another process's numbers (issue 12 §1, §3).

Every value a captured graph depends on must be in the cache key, guarded when the entry is
loaded, or a reason not to cache (compile_cache.py's docstring states the rule). Each test here
runs the same small program in two processes that share one cache directory but differ in one
such value - a Cell attribute that is a list, a global NumPy array over 1 MiB, an environment
variable read while capturing, a global list/dict/tuple/plain object, a global a Cell's
`construct` or helper method reads, a plain object held by a Cell - and asserts that the second
process computes ITS numbers (the oracle: NumPy on the same inputs), captures again instead of
loading, and that compiling again with the same values loads the entry it stored (the fix is not
"never cache"). One process runs every case in every capture mode, so the whole matrix costs two
interpreter start-ups.

The same values are also changed *inside* one process between two calls: the in-memory graph
cache must recompile as well. A value the key cannot describe (a random generator) makes the call
uncacheable, with the reason logged. And a cache entry that is a FIFO, a directory or larger
than any entry may be is read as corrupt (captured again), never waited on.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import minispore as ms

MODEL = textwrap.dedent('''
    """The values of this module come from the environment of the process that imports it."""
    import os
    import numpy as np
    import minispore as ms
    from minispore import nn

    V = float(os.environ["UNTRUSTED_V"])


    class ListScale(nn.Cell):
        def __init__(self):
            super().__init__()
            self.coeffs = [V, 1.0]                 # a list attribute read by construct

        def construct(self, x):
            return x * self.coeffs[0] + self.coeffs[1]


    SCALE = V


    class GlobalScale(nn.Cell):
        def construct(self, x):
            return x * SCALE                       # a global scalar read by a Cell's construct


    COEFFS = [V]


    class HelperScale(nn.Cell):
        def helper(self, x):
            return x * COEFFS[0]                   # a global list read by a helper method

        def construct(self, x):
            return self.helper(x)


    class Cfg:
        pass


    class ObjectScale(nn.Cell):
        def __init__(self):
            super().__init__()
            self.cfg = Cfg()                       # a plain object and a tuple held by the Cell
            self.cfg.scale = V
            self.shape = (V,)

        def construct(self, x):
            return x * self.cfg.scale * self.shape[0]


    cell_list, cell_global, cell_helper, cell_object = ListScale(), GlobalScale(), HelperScale(), ObjectScale()

    BIG = np.full(300_000, V, np.float32)          # 1.2 MB: more than the 1 MiB the key used to hash


    def big_array(x):
        return x + ms.Tensor(BIG[:4])


    def environ(x):
        return x * float(os.environ.get("UNTRUSTED_SCALE", "1"))


    TABLE = {"scale": V}
    PAIR = (V, 2.0)
    CFG = Cfg()
    CFG.scale = V


    def global_list(x):
        return x * COEFFS[0]


    def global_dict(x):
        return x * TABLE["scale"]


    def global_tuple(x):
        return x * PAIR[0]


    def global_object(x):
        return x * CFG.scale
''')

# (case, capture mode): every combination here gave the first process's numbers before the fix
CASES = [("cell_list", "trace"), ("cell_list", "ast"), ("cell_list", "bytecode"),
         ("big_array", "trace"), ("big_array", "ast"),
         ("environ", "trace"), ("environ", "ast"),
         ("global_list", "trace"), ("global_dict", "trace"), ("global_tuple", "trace"), ("global_object", "trace"),
         ("cell_global", "trace"), ("cell_helper", "trace"), ("cell_helper", "bytecode"),
         ("cell_object", "trace"), ("cell_object", "ast"), ("cell_object", "bytecode")]

CHILD = textwrap.dedent('''
    import json, sys
    import numpy as np
    import minispore as ms
    from minispore.graph import compile_cache as cc
    sys.path.insert(0, sys.argv[1])
    import untrusted_model as m
    ms.set_context(enable_compile_cache=True, compile_cache_path=sys.argv[2])
    x = ms.Tensor(np.arange(4, dtype=np.float32))
    out = {}
    for case, mode in json.loads(sys.argv[3]):
        runs = []
        for _ in range(2):             # the second time a new jit function: the in-memory cache is empty
            before = cc.stats()
            y = ms.jit(getattr(m, case), capture_mode=mode)(x)
            after = cc.stats()
            runs.append({"y": y.asnumpy().tolist(), "stats": {k: after[k] - before[k] for k in after}})
        out[f"{case}/{mode}"] = runs
    print(json.dumps(out))
''')

X = np.arange(4, dtype=np.float64)


def oracle(case, v, scale):
    """What the model computes, in float64 NumPy, for the values v and scale."""
    return {"cell_list": X * v + 1.0, "big_array": X + v, "environ": X * scale,
            "global_list": X * v, "global_dict": X * v, "global_tuple": X * v, "global_object": X * v,
            "cell_global": X * v, "cell_helper": X * v, "cell_object": X * v * v}[case]


FIRST = {"UNTRUSTED_V": "2.0", "UNTRUSTED_SCALE": "2.0"}
SECOND = {"UNTRUSTED_V": "3.5", "UNTRUSTED_SCALE": "0.25"}


def run_child(model_dir, cache_dir, values, timeout=180):
    env = dict(os.environ, **values)
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_dir), str(cache_dir), json.dumps(CASES)],
                         capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory):
    """Process 1 (FIRST values) stores every case; process 2 (SECOND values) runs with the same
    cache. Each compiles every case twice, the second time through a new jit function, which
    must load what the first stored."""
    root = tmp_path_factory.mktemp("untrusted")
    model_dir = root / "model"
    model_dir.mkdir()
    (model_dir / "untrusted_model.py").write_text(MODEL)
    cache_dir = root / "cache.ms"
    runs = [run_child(model_dir, cache_dir, values) for values in (FIRST, SECOND)]
    return model_dir, cache_dir, runs


def _values(values):
    return float(values["UNTRUSTED_V"]), float(values["UNTRUSTED_SCALE"])


@pytest.mark.parametrize("case,mode", CASES, ids=[f"{c}-{m}" for c, m in CASES])
def test_a_second_process_gets_its_own_numbers(two_processes, case, mode):
    _, _, (first, second) = two_processes
    (first, _), (second, again) = first[f"{case}/{mode}"], second[f"{case}/{mode}"]
    np.testing.assert_allclose(first["y"], oracle(case, *_values(FIRST)), rtol=1e-6)
    np.testing.assert_allclose(second["y"], oracle(case, *_values(SECOND)), rtol=1e-6)
    # the first process's entry was not trusted: captured again (a new key, or a stale entry)
    assert second["stats"]["captures"] == 1 and second["stats"]["hits"] == 0
    # and the cache still works: the same values load the entry the second process stored
    np.testing.assert_allclose(again["y"], oracle(case, *_values(SECOND)), rtol=1e-6)
    assert again["stats"]["hits"] == 1 and again["stats"]["captures"] == 0


def test_a_fifo_entry_is_corrupt_not_a_hang(two_processes, tmp_path):
    # every <key>.json replaced by a named pipe: opening one for reading would wait for a writer
    # forever; it must count as corrupt, be captured again and rewritten as a regular file
    model_dir, cache_dir, _ = two_processes
    copy = tmp_path / "cache.ms"
    shutil.copytree(cache_dir, copy)
    entries = sorted(copy.glob("rank_0/graph_cache/*.json"))
    assert len(entries) >= len(CASES)
    for e in entries:
        e.unlink()
        os.mkfifo(e)
    third = run_child(model_dir, copy, SECOND, timeout=120)
    for case, mode in CASES:
        got, again = third[f"{case}/{mode}"]
        np.testing.assert_allclose(got["y"], oracle(case, *_values(SECOND)), rtol=1e-6)
        assert got["stats"]["corrupt"] == 1 and got["stats"]["captures"] == 1 and got["stats"]["stores"] == 1
        assert again["stats"]["hits"] == 1                     # the rewritten entry is good
    # the entries this process used are regular files again (those of the first process's values,
    # which this one never looked up, are still pipes)
    rewritten = [e for e in entries if stat.S_ISREG(os.stat(e).st_mode)]
    assert len(rewritten) == len(CASES)


# -- the same changes inside one process: the in-memory cache recompiles -------------------------------
@pytest.fixture
def model(tmp_path, monkeypatch):
    (tmp_path / "untrusted_model.py").write_text(MODEL)
    monkeypatch.syspath_prepend(str(tmp_path))
    for k, v in FIRST.items():
        monkeypatch.setenv(k, v)
    sys.modules.pop("untrusted_model", None)
    import untrusted_model
    yield untrusted_model
    sys.modules.pop("untrusted_model", None)


def _change(m, case, monkeypatch):
    """Change the value behind `case` in place (3.5 for V, 0.25 for the scale)."""
    if case == "cell_list":
        m.cell_list.coeffs[0] = 3.5
    elif case == "environ":
        monkeypatch.setenv("UNTRUSTED_SCALE", "0.25")
    elif case == "global_list":
        m.COEFFS[0] = 3.5
    elif case == "global_dict":
        m.TABLE["scale"] = 3.5
    elif case == "cell_object":
        m.cell_object.shape = (3.5,)
        m.cell_object.cfg.scale = 3.5


IN_PROCESS = [(case, mode) for case in ("cell_list", "environ", "global_list", "global_dict", "cell_object")
              for mode in ("trace", "ast", "bytecode")]


@pytest.mark.parametrize("case,mode", IN_PROCESS, ids=[f"{c}-{m}" for c, m in IN_PROCESS])
def test_a_change_between_two_calls_recompiles(model, monkeypatch, case, mode):
    jf = ms.jit(getattr(model, case), capture_mode=mode)
    x = ms.Tensor(np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(jf(x).asnumpy(), oracle(case, 2.0, 2.0), rtol=1e-6)
    _change(model, case, monkeypatch)
    np.testing.assert_allclose(jf(x).asnumpy(), oracle(case, 3.5, 0.25), rtol=1e-6)


def test_a_list_inside_a_lazy_inline_layer_is_guarded_too():
    # lazy_inline layers are guarded as one unit, in O(1) while no Cell API call changes state; an
    # in-place `coeffs[0] = 5.0` bypasses the API, so a layer holding a list is walked instead
    from minispore import nn

    class Block(nn.Cell):
        @ms.lazy_inline
        def __init__(self):
            super().__init__()
            self.coeffs = [2.0]

        def construct(self, x):
            return x * self.coeffs[0]

    class Net(nn.Cell):
        def __init__(self):
            super().__init__()
            self.blocks = nn.CellList([Block(), Block()])

        def construct(self, x):
            return self.blocks[1](self.blocks[0](x))
    net = Net()
    jf = ms.jit(net, capture_mode="trace")
    x = ms.Tensor(np.ones(2, np.float32))
    np.testing.assert_allclose(jf(x).asnumpy(), [4.0, 4.0])
    net.blocks[0].coeffs[0] = 5.0
    np.testing.assert_allclose(jf(x).asnumpy(), [10.0, 10.0])


def test_a_list_the_code_only_appends_to_does_not_recompile():
    # its contents cannot have shaped the graph (the side effect runs once, at capture)
    log = []

    @ms.jit(capture_mode="trace")
    def f(x):
        log.append("called")
        return x * 2
    x = ms.Tensor(np.ones(2, np.float32))
    f(x)
    log.extend([7, 8])
    np.testing.assert_allclose(f(x).asnumpy(), [2.0, 2.0])
    assert f.cache().compiles == 1 and log == ["called", 7, 8]


# -- what the key cannot describe is refused, not trusted; an entry's file is never trusted ------------------
@pytest.fixture
def cache_on(tmp_path):
    from minispore.graph import compile_cache as cc
    path = tmp_path / "cache.ms"
    ms.set_context(enable_compile_cache=True, compile_cache_path=str(path))
    cc.reset_stats()
    yield path
    ms.set_context(enable_compile_cache=False, compile_cache_path="")


RNG = np.random.default_rng(0)       # a generator: no state the key could hash


def draws_at_capture(x):
    return x * float(RNG.random())   # trace mode: a number drawn once, baked into the graph


def test_a_global_the_key_cannot_describe_makes_the_call_uncacheable(cache_on, caplog):
    # storing this graph would hand the next process this process's random number: the call is
    # compiled in memory only, and the log says why
    import logging
    from minispore.graph import compile_cache as cc
    caplog.set_level(logging.INFO, logger="minispore.jit")
    x = ms.Tensor(np.ones(3, dtype=np.float32))
    out = ms.jit(draws_at_capture, capture_mode="trace")(x)
    assert out.shape == (3,)
    assert cc.stats()["uncacheable"] == 1 and cc.stats()["stores"] == 0
    assert any("global 'RNG'" in r.getMessage() and "not cached" in r.getMessage() for r in caplog.records)


def test_a_directory_in_place_of_an_entry_is_corrupt_and_the_cache_keeps_working(cache_on, recwarn):
    from minispore.graph import compile_cache as cc

    def f(x):
        return x * 3.0
    x = ms.Tensor(np.arange(3, dtype=np.float32))
    ms.jit(f, capture_mode="trace")(x)
    (entry,) = (cache_on / "rank_0" / "graph_cache").glob("*.json")
    entry.unlink()
    entry.mkdir()
    cc.reset_stats()
    np.testing.assert_allclose(ms.jit(f, capture_mode="trace")(x).asnumpy(), np.arange(3) * 3.0)
    assert cc.stats()["corrupt"] == 1 and cc.stats()["captures"] == 1
    # that one entry could not be rewritten; the directory is not reported unwritable
    assert not [w for w in recwarn if "cannot be written" in str(w.message)]

    def g(x):
        return x * 4.0
    ms.jit(g, capture_mode="trace")(x)
    assert cc.stats()["stores"] == 1


def test_an_entry_larger_than_any_entry_may_be_is_corrupt(cache_on, monkeypatch):
    from minispore.graph import compile_cache as cc
    from minispore.graph.compile_cache import files as cc_files

    def f(x):
        return x - 1.0
    x = ms.Tensor(np.arange(3, dtype=np.float32))
    ms.jit(f, capture_mode="trace")(x)
    (entry,) = (cache_on / "rank_0" / "graph_cache").glob("*.json")
    monkeypatch.setattr(cc_files, "MAX_ENTRY_BYTES", entry.stat().st_size - 1)     # the size is checked before reading
    cc.reset_stats()
    np.testing.assert_allclose(ms.jit(f, capture_mode="trace")(x).asnumpy(), np.arange(3) - 1.0)
    assert cc.stats()["corrupt"] == 1 and cc.stats()["hits"] == 0 and cc.stats()["captures"] == 1
