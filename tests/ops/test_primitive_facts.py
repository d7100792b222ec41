"""The Primitive facts (ops/primitive.py): no module outside the op definitions names a primitive,
and the facts the op definitions declare are true of their kernels.

(a) An op is defined in one place: its family module (ops/prims, ops/operations), its op-table
    entry (testing/opdb) and a backend's kernel table. Everything else - memory planning, streams,
    DryRun, fusion, codegen - reads the primitive's facts (`view`, `random`, `inplace`,
    `from_shape`, `cost`, `fusion`, `sharding`) instead of keeping its own list of op names, so that
    adding an op never means editing a pass. The scan below fails on a comparison of a name with a
    primitive's name (`x.name == "add"`, `name in ("add", "mul")`, `node.op.name in SOME_SET`) and
    on a module-level tuple/list/set/frozenset/dict literal holding 3 or more primitive names.
    `ALLOWED` lists the legitimate ones, each with the reason it is not a per-op fact.

(b) The facts hold: a `View`'s `take` returns arrays that share memory with the input and equal the
    kernel's outputs, a `random` op really draws from the global generator (and no other op does),
    and a `from_shape` op makes the same value as the primitive it names.
"""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

import minispore as ms
from minispore.common import context
from minispore.common.tensor import Tensor
from minispore.ops import primitive as P
from minispore.ops.primitive import PRIMITIVES, AbstractTensor, get_primitive
from minispore.testing import OP_DB
from minispore.testing.checks import run_op

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ("minispore", "plugins/ascend/minispore_ascend")
# where ops are defined: the families, the class-style operators, the op table, the plugin's kernel table
OP_DEFINITIONS = ("minispore/ops/prims/", "minispore/ops/operations/", "minispore/testing/opdb/",
                  "plugins/ascend/minispore_ascend/kernels.py")

# (module, symbol) -> why naming primitives there is not a per-op fact. `symbol` is the assigned
# name for a module-level literal, the enclosing function (Class.method) for a comparison.
ALLOWED = {
    # transpose folding rewrites by the identity of two ops (transpose(a @ b) -> b^T @ a^T); a
    # per-op fact for "transposes fold into this op" is the follow-up that removes these entries
    ("minispore/graph/passes/transpose_folding.py", "_perm"):
        "reads the permutation of a transpose node: the rewrite is about that one op",
    ("minispore/graph/passes/transpose_folding.py", "_GraphFolder._product_to_flip"):
        "finds the matmul/bmm feeding a transpose: the algebraic identity names both ops",
    ("minispore/graph/passes/transpose_folding.py", "_drop_unread"):
        "drops the transpose/matmul nodes the rewrite made unread",
    ("minispore/graph/passes/transpose_folding.py", "_DROPPABLE"):
        "the ops the rewrite itself creates and may drop again (transpose, matmul, bmm)",
    ("minispore/graph/parallel/propagate.py", "propagate"):
        "ms.reshard is the user's explicit layout request: its layout is the user's device matrix laid "
        "over the stage's, which a per-op sharding rule cannot see",
    ("minispore/graph/parallel/redistribution.py", "KINDS"):
        "the kinds of a redistribution plan's steps (its own vocabulary; the collectives share the names)",
    ("minispore/graph/parallel/redistribution.py", "COMMUNICATING"):
        "the plan-step kinds that move data (its own vocabulary; the collectives share the names)",
    ("minispore/parallel/simulator/cost.py", "COLLECTIVES"):
        "the simulator's own vocabulary of communication kinds, each with its alpha-beta ring formula "
        "(simulated tasks are not graph nodes; the collectives share the names)",
    ("minispore/parallel/simulator/gantt.py", "COLOURS"):
        "the Gantt chart's colour per task kind (the simulator's vocabulary, which shares the names)",
    ("minispore/parallel/simulator/jit_graph.py", "_KIND"):
        "maps a collective node (found by its `collective` fact) to the simulator's ring formula; the "
        "formula depends on the communication pattern, which no Primitive fact records yet",
    ("minispore/ops/tensor_methods.py", "_SAME_NAME"):
        "Tensor method names that equal functional-API names (the Python API surface, not op facts)",
    ("minispore/ops/composite.py", "_REEXPORTED"):
        "functional-API names re-exported by ops.composite (the Python API surface)",
    ("minispore/mint/functional.py", "SAME_AS_OPS"):
        "mint functions that are the ops functional of the same name (the Python API surface)",
    ("minispore/mint/nn/functional.py", "SAME_AS_OPS"):
        "mint.nn.functional functions that are the ops functional of the same name (API surface)",
    ("minispore/nn/layers/activation.py", "_ACTIVATIONS"):
        "nn.get_activation's layer names ('relu' -> nn.ReLU): Cell classes, not primitives",
    ("minispore/common/initializer.py", "_ALIASES"):
        "initializer names ('zeros', 'normal' -> Zero, Normal): weight initializers, not primitives",
    ("minispore/ops/c_expr.py", "VECTOR_MATH"):
        "libm function names with vector versions (exp, log ...): C functions, not primitives",
    ("minispore/testing/op_fuzz.py", "_NAME_KINDS"):
        "parameter names ('pad', 'threshold', 'diagonal' are also argument names) -> fuzz value kinds",
}

_CONTAINERS = ("frozenset", "set", "tuple", "list", "dict")
_NAME_ATTRS = ("name", "op_name", "prim_name")


def _strings(node):
    """The str constants of a tuple/list/set literal or a dict's keys (through frozenset(...) etc.)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _CONTAINERS \
            and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        elts = node.elts
    elif isinstance(node, ast.Dict):
        elts = [k for k in node.keys if k is not None]
    else:
        return None
    return [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _is_name(e) -> bool:
    """Does this expression hold a name (`x.name`, `name`, `op_name`)?"""
    if isinstance(e, ast.Attribute):
        return e.attr in _NAME_ATTRS
    return isinstance(e, ast.Name) and (e.id in _NAME_ATTRS or e.id.endswith("_name"))


def _is_op_name(e) -> bool:
    """`<...>.op.name` / `prim.name`: the name of a node's primitive."""
    return (isinstance(e, ast.Attribute) and e.attr == "name" and isinstance(e.value, (ast.Attribute, ast.Name))
            and (e.value.attr if isinstance(e.value, ast.Attribute) else e.value.id) in ("op", "prim"))


class _Scanner(ast.NodeVisitor):
    def __init__(self, names):
        self.names = names
        self.scope: list = []
        self.found: list = []                 # (symbol, line, what)

    def _symbol(self):
        return ".".join(self.scope) or "<module>"

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Compare(self, node):
        sides = [node.left] + list(node.comparators)
        if any(_is_name(s) for s in sides):
            for s in sides:
                strs = [s.value] if isinstance(s, ast.Constant) and isinstance(s.value, str) else _strings(s) or []
                hit = [x for x in strs if x in self.names]
                if hit:
                    self.found.append((self._symbol(), node.lineno, f"compares a name with {hit}"))
                    break
            else:
                if _is_op_name(node.left) and any(isinstance(o, (ast.In, ast.NotIn)) for o in node.ops):
                    self.found.append((self._symbol(), node.lineno, "looks a primitive's name up in a collection"))
        self.generic_visit(node)


def scan_source(source: str, names) -> list:
    """[(symbol, line, what)] for every place `source` names primitives (see the module docstring)."""
    tree = ast.parse(source)
    sc = _Scanner(names)
    sc.visit(tree)
    for st in tree.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
            target = st.targets[0] if isinstance(st, ast.Assign) else st.target
            symbol = getattr(target, "id", None) or ast.unparse(target)
            if symbol in ("__all__", "__slots__"):
                continue
            hit = [x for x in _strings(st.value) or [] if x in names]
            if len(hit) >= 3:
                sc.found.append((symbol, st.lineno, f"a table of {len(hit)} primitive names {hit[:4]}..."))
    return sc.found


def _modules():
    for base in SCANNED:
        for p in sorted((ROOT / base).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if not rel.startswith(OP_DEFINITIONS):
                yield rel, p


def test_the_scan_finds_each_kind_of_name_use():
    names = {"add", "mul", "exp", "reshape"}
    src = '''
TABLE = frozenset(("add", "mul", "exp"))
COSTS = {"add": 1, "mul": 1, "reshape": 0}
__all__ = ["add", "mul", "exp"]
TWO = ("add", "mul")
def f(node, name):
    if node.op.name == "add":
        pass
    if name in ("exp", "log"):
        pass
    return node.op.name in TABLE
class C:
    def g(self, prim):
        return prim.name != "reshape" and self.name == "not_an_op"
'''
    found = {(s, line) for s, line, _ in scan_source(src, names)}
    assert found == {("TABLE", 2), ("COSTS", 3), ("f", 7), ("f", 9), ("f", 11), ("C.g", 14)}


def test_no_module_outside_the_op_definitions_names_primitives():
    names = set(PRIMITIVES)
    flagged, used = [], set()
    for rel, path in _modules():
        for symbol, line, what in scan_source(path.read_text(), names):
            if (rel, symbol) in ALLOWED:
                used.add((rel, symbol))
            else:
                flagged.append(f"{rel}:{line} ({symbol}): {what}")
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"ALLOWED entries that no longer match anything (remove them): {stale}"
    assert not flagged, ("modules outside the op definitions name primitives; read a Primitive fact "
                         "(ops/primitive.py) instead, or allow-list with a reason:\n  " + "\n  ".join(flagged))


# -- (b) the facts are true of the kernels ------------------------------------------------------------
def _record_op_db_calls():
    """Run every OP_DB sample once (its first dtype) through a recording executor: for each primitive
    call, (prim, input arrays, attrs, did the call advance the global generator)."""
    calls = []
    inner = P.get_executor()

    def state():
        return context.rng().bit_generator.state

    def recording(prim, inputs, attrs):
        ins = tuple(x._data.copy() if isinstance(x, Tensor) else x for x in inputs)
        before = state()
        out = inner(prim, inputs, attrs)
        calls.append((prim, ins, dict(attrs), state() != before))
        return out

    old = P.set_executor(recording)
    try:
        for info in OP_DB:
            rng = np.random.default_rng(0)
            for sample in info.sample_inputs(rng, info.dtypes[0].np):
                try:
                    run_op(info, sample)
                except ms.MinisporeError:
                    pass                      # (a bad-input sample: its calls up to the error still count)
    finally:
        P.set_executor(old)
    return calls


@pytest.fixture(scope="module")
def op_db_calls():
    return _record_op_db_calls()


def _avals(prim, ins, attrs):
    tensors = [Tensor(x) if isinstance(x, np.ndarray) else x for x in ins]
    out = prim.infer(*tensors, **attrs)
    return out if isinstance(out, tuple) else (out,)


def test_view_takes_share_memory_and_equal_the_kernel(op_db_calls):
    taken = {name: 0 for name, p in PRIMITIVES.items() if p.view is not None}
    for prim, ins, attrs, _ in op_db_calls:
        if prim.view is None or prim.name not in PRIMITIVES or not isinstance(ins[0], np.ndarray):
            continue
        x = ins[0]
        views = prim.view.take(x, _avals(prim, ins, attrs), attrs)
        if views is None:
            continue                          # (the kernel copies for these attrs: e.g. getitem with an array index)
        kernel = prim.impl(*ins, **attrs)
        kernel = kernel if isinstance(kernel, tuple) else (kernel,)
        assert len(views) == len(kernel), f"{prim.name}: {len(views)} views for {len(kernel)} outputs"
        for v, k in zip(views, kernel):
            assert isinstance(v, np.ndarray) and v.shape == k.shape, f"{prim.name} {attrs}: {v.shape} vs {k.shape}"
            np.testing.assert_array_equal(v, k, err_msg=f"{prim.name} {attrs}")
            if v.size:
                assert np.shares_memory(v, x), f"{prim.name} {attrs}: take copied"
        taken[prim.name] += 1
    assert all(taken.values()), f"view primitives no OP_DB sample exercised with a view: " \
                                f"{[n for n, c in taken.items() if not c]}"


def test_view_takes_return_none_where_the_kernel_copies():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1)    # not C-contiguous
    reshape = get_primitive("reshape")
    assert reshape.view.take(x, (AbstractTensor((24,), ms.float32),), {"shape": (24,)}) is None
    assert not np.shares_memory(reshape.impl(x, shape=(24,)), x)
    getitem = get_primitive("getitem")
    from minispore.ops.prims._indexspec import normalize
    spec, tensors = normalize("getitem", (4, 2, 3), (Tensor(np.array([0, 2])),))
    assert getitem.view.take(x, (AbstractTensor((2, 2, 3), ms.float32),), {"spec": spec}) is None
    spec, _ = normalize("getitem", (4, 2, 3), (1, 0, 2))
    assert getitem.view.take(x, (AbstractTensor((), ms.float32),), {"spec": spec}) is None   # a 0-d result


def test_no_op_without_the_random_fact_draws(op_db_calls):
    for prim, _ins, _attrs, advanced in op_db_calls:
        if prim.name in PRIMITIVES:
            assert prim.random or not advanced, f"{prim.name} draws from the global generator but random=False"


_PROBS = np.array([[0.1, 0.2, 0.3, 0.4], [0.5, 0.0, 0.25, 0.25]], dtype=np.float32)
_QKV = np.random.default_rng(0).standard_normal((3, 1, 2, 8, 4)).astype(np.float32)
# one call per random primitive, through its functional (most are not in OP_DB: no reference to compare)
RANDOM_CALLS = {
    "uniform": lambda: ms.ops.uniform((3, 4), Tensor(np.float32(-1.0)), Tensor(np.float32(2.0))),
    "normal": lambda: ms.ops.normal((3, 4), 0.0, 1.0),
    "multinomial": lambda: ms.ops.multinomial(Tensor(_PROBS), 16),
    "dropout": lambda: ms.ops.dropout(Tensor(np.ones((4, 8), np.float32)), p=0.5),
    "flash_attention_score": lambda: ms.ops.flash_attention_score(
        *(Tensor(a) for a in _QKV), head_num=2, keep_prob=0.5, input_layout="BNSD"),
}


def test_every_random_op_has_a_sample_call():
    assert set(RANDOM_CALLS) == {n for n, p in PRIMITIVES.items() if p.random}


@pytest.mark.parametrize("name", sorted(RANDOM_CALLS))
def test_random_ops_draw_from_the_global_generator(name):
    def run():
        out = RANDOM_CALLS[name]()
        return (out[0] if isinstance(out, tuple) else out).asnumpy()

    ms.set_seed(7)
    a, b = run(), run()
    ms.set_seed(7)
    c = run()
    assert not np.array_equal(a, b), f"{name}: two calls gave the same numbers"
    np.testing.assert_array_equal(a, c, err_msg=f"{name}: set_seed does not reproduce it")
    assert get_primitive(name).random


@pytest.mark.parametrize("like", [n for n, p in PRIMITIVES.items() if p.from_shape is not None])
def test_from_shape_makes_the_same_value(like):
    prim = PRIMITIVES[like]
    target = get_primitive(prim.from_shape)
    for x, dtype in [(np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5, None),
                     (np.arange(4, dtype=np.int32), None), (np.ones((3, 1, 2)), ms.float16), (np.float64(2.0), None)]:
        a = prim(Tensor(x), **({} if dtype is None else {"dtype": dtype}))
        b = target(shape=tuple(a.shape), dtype=a.dtype)
        assert a.dtype is b.dtype and a.shape == b.shape == np.shape(x)
        np.testing.assert_array_equal(a.asnumpy(), b.asnumpy())
