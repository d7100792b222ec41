"""StateGuard: the Python state a captured graph may have read from objects, checked on every call.

What it guards is the "in memory" column of guards/rule.py for objects: the plain scalar
attributes of the root objects (a Cell as `self`, objects among the arguments and those the
function's closure/globals hold), of every object in their dict attributes (a Cell's sub-cells),
the identity of each sub-cell and Parameter, the containers they hold by contents
(guards/contents.py), a user class's scalar class attributes, and each `@lazy_inline` layer as one
unit by the signature of guards/walk.py (guards/layer_state.py: O(1) while the Cell state epoch
does not move; which cells are such layers, jit says by passing lazy_inline's `is_lazy`).
graph/cache.py decides which objects are the roots (`state_roots`).
"""
from __future__ import annotations

import itertools
import operator

from ...common.dtype import DType
from .layer_state import LayerStateCheck, describe as describe_layer
from .contents import _MISSING, _ContainerGroup, _is_container, _label_text
from .rule import MAX_DICT as _MAX_DICT, SCALARS as _SCALARS, is_jit_private
from .walk import (_EXACT_LAYOUTS, _OBJECT_LAYOUTS, _REGISTRY_LAYOUTS, _ObjectLayout, _RegistryLayout,
                   _type_determined, _value_types, class_scalar_names, holds_containers)

# -- object state ---------------------------------------------------------------------------------
_DICT_OF = operator.attrgetter("__dict__")
_repeat = itertools.repeat


def _same(now, was):
    """The equality guards use (that of tuple comparison: identity, then `==`), never raising."""
    if now is was:
        return True
    try:
        return bool(now == was)
    except Exception:            # a scalar replaced by an array: certainly not the same
        return False


class _ResolvedCheck:
    """Scalar attributes of one object read through `getattr` (class attributes: `class C: pos = 0`,
    and scalars the capture created on the object): an instance attribute that later shadows the
    class's value, or a changed class attribute, fails the guard."""

    __slots__ = ("label", "obj", "keys", "vals")

    def __init__(self, label, obj, keys, vals):
        self.label, self.obj, self.keys, self.vals = label, obj, tuple(keys), tuple(vals)

    def failure(self):
        obj = self.obj
        for k, v in zip(self.keys, self.vals):
            now = getattr(obj, k, _MISSING)
            if now is not v and not (type(now) is type(v) and now == v):
                was = "<not set>" if v is _MISSING else repr(v)
                now = "<deleted>" if now is _MISSING else repr(now)
                return f"{_label_text(self.label)}.{k} changed: {was} -> {now}"
        return None

    def failed(self):
        return self.failure() is not None

    def explain(self, i):
        return self.failure()


class _ScalarGroup:
    """The scalar attributes of every object of one layout (every layer's attention cell, say),
    checked in one C-level pass: `map` an itemgetter over their `__dict__`s and compare the list
    with the values at compile time. `explain(i)` words what changed in the i-th object."""

    __slots__ = ("keys", "get", "dicts", "vals", "labels")

    def __init__(self, keys, get):
        self.keys, self.get = keys, get
        self.dicts, self.vals, self.labels = [], [], []

    def failed(self):
        try:
            return list(map(self.get, self.dicts)) != self.vals
        except Exception:            # a deleted attribute (KeyError), an array where a scalar was
            return True

    def explain(self, i, label=None):
        keys = self.keys
        vals = self.vals[i] if len(keys) > 1 else (self.vals[i],)
        return _explain_dict(self.labels[i] if label is None else label, self.dicts[i], keys, vals, (), ())


class _RegistryGroup:
    """Dict attributes (a cell's `_cells` / `_params`) with the same keys and member types: their
    scalar members by value and their object members (sub-cells, Parameters) by identity, checked
    in one C-level pass like `_ScalarGroup`."""

    __slots__ = ("lay", "dicts", "svals", "ids", "labels")

    def __init__(self, lay):
        self.lay = lay
        self.dicts, self.svals, self.ids, self.labels = [], [], [], []

    def failed(self):
        lay = self.lay
        try:
            if lay.sget is not None and list(map(lay.sget, self.dicts)) != self.svals:
                return True
            if lay.iget is not None:
                got = map(lay.iget, self.dicts)
                if lay.flat:
                    got = itertools.chain.from_iterable(got)
                return list(map(id, got)) != self.ids
        except Exception:
            return True
        return False

    def explain(self, i, label=None):
        lay = self.lay
        svals = ((self.svals[i] if len(lay.skeys) > 1 else (self.svals[i],)) if lay.skeys else ())
        n = len(lay.ikeys)
        return _explain_dict(self.labels[i] if label is None else label, self.dicts[i],
                             lay.skeys, svals, lay.ikeys, self.ids[i * n:(i + 1) * n])


def _explain_dict(label, d, skeys, svals, ikeys, ids):
    """The first thing that changed in dict `d` (in the order the fast check would meet it)."""
    for k in skeys:
        if k not in d:
            return f"{_label_text(label)}.{k} was deleted"
    for k, v in zip(skeys, svals):
        if not _same(d[k], v):
            return f"{_label_text(label)}.{k} changed: {v!r} -> {d[k]!r}"
    for k in ikeys:
        if k not in d:
            return f"{_label_text(label)}.{k} was deleted"
    for k, i in zip(ikeys, ids):
        if id(d[k]) != i:
            return f"{_label_text(label)}.{k} was replaced by another object"
    return None


def _class_scalars(names, instance_dict):
    """Scalar attributes an object reads from its class (first class of the MRO that defines each;
    `names` from `class_scalar_names`), unless its own `__dict__` shadows them."""
    keys, vals = [], []
    for k, owner in names:
        if k in instance_dict:
            continue
        v = vars(owner).get(k, _MISSING)
        if type(v) in _SCALARS or isinstance(v, DType):
            keys.append(k)
            vals.append(v)
    return keys, vals


class StateGuard:
    """Guards the Python state a trace may have read from objects: for each root object (a Cell
    passed as `self`, an object among the arguments, objects the function's closure/globals hold)
    the plain scalar attributes (`training`, a dropout rate, flags) and, through dict attributes
    (a Cell's `_cells` / `_params`), the same for every sub-object plus the identity of each member
    (a replaced Parameter or sub-cell recompiles).

    Built once at compile time, one level of the object tree at a time (breadth first): the
    objects of a level are sorted by layout (class and attribute names; `_ObjectLayout.fits`
    checks that each object's values have the kinds the layout expects) and each layout's objects
    are read with C-level `map`s, so a 32-layer model costs a few dozen Python steps per level
    rather than a dozen per cell. Checking is the same: one `map(itemgetter, dicts)` per layout,
    compared with the values at compile time. Only when one fails does `failure()` walk the
    objects depth first, as the cells nest, to word the first change
    ("net.layers.0.training changed: True -> False").
    """

    def __init__(self, roots, is_lazy=None):
        self._fast: list = []            # group checks: `failed()` is True when something changed
        self._objects: dict = {}         # object layout -> its _ScalarGroup
        self._registries: dict = {}      # registry layout -> its _RegistryGroup
        self._resolved: dict = {}        # id(object) -> _ResolvedCheck of its class attributes
        self._created: dict = {}         # id(object) -> _ResolvedCheck of attributes the capture created
        self._class_names: dict = {}     # class -> class_scalar_names (this build)
        self._layers: dict = {}          # id(lazy_inline cell) -> LayerStateCheck: guarded as one unit
        self._containers = _ContainerGroup()     # lists, tuples, dicts, sets: by contents
        # `is_lazy(cell)`: whether a cell is a `@lazy_inline` layer now (jit passes lazy_inline's own
        # test, which knows whether lazy_inline is switched on; without one, no layer is a unit)
        self._is_lazy = is_lazy
        # containers among the roots (globals and closure variables holding a list, a dict...)
        objects, held = [], set()
        for label, obj in roots:
            if _is_container(obj):
                if id(obj) not in held:
                    held.add(id(obj))
                    self._containers.add(label, {label: obj}, label)
            else:
                objects.append((label, obj))
        roots = objects
        # the roots, for the explanation walk: (label, id, __dict__) - not the objects themselves,
        # so a guard does not keep alive a Cell whose cache holds it
        self._roots = [(label, id(obj), getattr(obj, "__dict__", None)) for label, obj in roots]
        self._index = None               # (objects, registries): id(dict) -> (group, i), on demand
        # every walked object, its attribute names before the capture, its label (note_capture_writes)
        self._objs: list = []
        self._keys: list = []
        self._labels: list = []
        seen: set = set()
        labels, objs = [label for label, _ in roots], [obj for _, obj in roots]
        while objs:
            labels, objs = self._visit_level(labels, objs, seen)
        self._class_names = None
        if self._containers.holders:
            self._containers.snapshot()
            self._fast.append(self._containers)

    def _visit_level(self, labels, objs, seen):
        """Snapshot one level of objects; return the next level (their sub-objects)."""
        ids = list(map(id, objs))
        if len(set(ids)) != len(ids) or not seen.isdisjoint(ids):       # shared objects: snapshot once
            keep = []
            for i, oid in enumerate(ids):
                if oid not in seen:
                    seen.add(oid)
                    keep.append(i)
            labels, objs = [labels[i] for i in keep], [objs[i] for i in keep]
        else:
            seen.update(ids)
        dicts = list(map(getattr, objs, _repeat("__dict__"), _repeat(None)))
        if self._is_lazy is not None and any(isinstance(d, dict) and "_lazy_inline" in d for d in dicts):
            labels, objs, dicts = self._guard_layers(labels, objs, dicts)
        if list(map(type, dicts)).count(dict) != len(dicts) or max(map(len, dicts), default=0) > _MAX_DICT:
            keep = [i for i, d in enumerate(dicts) if isinstance(d, dict) and len(d) <= _MAX_DICT]
            labels, objs, dicts = [labels[i] for i in keep], [objs[i] for i in keep], [dicts[i] for i in keep]
        if not objs:
            return [], []
        keys = list(map(tuple, dicts))
        classes = list(map(type, objs))
        lkeys = list(zip(classes, keys))
        lays = list(map(_OBJECT_LAYOUTS.get, lkeys))
        if None in lays:
            for i, lay in enumerate(lays):
                if lay is None:
                    # (looked up again: an earlier object of this level may have just made it)
                    lay = _OBJECT_LAYOUTS.get(lkeys[i])
                    if lay is None:
                        lay = _OBJECT_LAYOUTS[lkeys[i]] = _ObjectLayout(dicts[i])
                    lays[i] = lay
        self._objs += objs
        self._keys += keys
        self._labels += labels
        for cls in set(classes):
            names = self._class_names.get(cls)
            if names is None:
                names = self._class_names[cls] = class_scalar_names(cls)
            if names:                    # user classes with scalar class attributes (rare)
                for label, obj, d in zip(labels, objs, dicts):
                    if type(obj) is cls:
                        ckeys, cvals = _class_scalars(names, d)
                        if ckeys:
                            check = self._resolved[id(obj)] = _ResolvedCheck(label, obj, ckeys, cvals)
                            self._fast.append(check)
        reg_dicts, reg_labels = [], []
        for lay, ds, ls in _by_layout(lays, dicts, labels):
            self._snapshot_objects(lay, ds, ls, reg_dicts, reg_labels, exact=False)
        if reg_dicts and max(map(len, reg_dicts)) > _MAX_DICT:
            keep = [i for i, r in enumerate(reg_dicts) if len(r) <= _MAX_DICT]
            reg_dicts, reg_labels = [reg_dicts[i] for i in keep], [reg_labels[i] for i in keep]
        return self._visit_registries(reg_labels, reg_dicts)

    def _guard_layers(self, labels, objs, dicts):
        """@lazy_inline cells (transformer layers) are guarded as one unit each, by the signature
        lazy_inline itself reads to share their subgraph (layer_state.describe, remembered for the
        capture that follows): one walk per layer, and a check that is O(1) while no Cell changes.
        A layer holding state the Cell epoch cannot see (a plain object) is walked as usual."""
        is_lazy = self._is_lazy
        keep = []
        for i, (obj, d) in enumerate(zip(objs, dicts)):
            if isinstance(d, dict) and "_lazy_inline" in d and is_lazy(obj):
                st = describe_layer(obj)
                # (a list attribute changes in place without the Cell API moving the epoch: a
                # layer holding one is walked, so its containers are guarded by contents)
                if st.structure is not None and not st.untracked and not holds_containers(st.structure):
                    check = self._layers[id(obj)] = LayerStateCheck(_label_text(labels[i]), st)
                    self._fast.append(check)
                    continue
            keep.append(i)
        return [labels[i] for i in keep], [objs[i] for i in keep], [dicts[i] for i in keep]

    def _snapshot_objects(self, lay, ds, ls, reg_dicts, reg_labels, exact):
        """Snapshot the scalars of objects of one layout; collect their non-empty dict attributes."""
        svals = list(map(lay.sget, ds)) if lay.sget is not None else None
        regs = list(itertools.chain.from_iterable(map(lay.dget, ds))) if lay.dget is not None else None
        if not exact and not lay.fits(ds, svals, regs):
            # some objects hold other kinds of values under these names (a None that became a
            # Cell...): classify each by its value types instead
            tkeys = list(zip(map(tuple, ds), _value_types(ds)))
            exact_lays = [_EXACT_LAYOUTS.get(k) or _EXACT_LAYOUTS.setdefault(k, _ObjectLayout(d))
                          for k, d in zip(tkeys, ds)]
            for xlay, xds, xls in _by_layout(exact_lays, ds, ls):
                self._snapshot_objects(xlay, xds, xls, reg_dicts, reg_labels, exact=True)
            return
        if lay.okeys:
            add = self._containers.add
            for d, label in zip(ds, ls):
                for k in lay.okeys:
                    if _is_container(d[k]):
                        add((label, k), d, k)
        if svals is not None:
            g = self._objects.get(lay)
            if g is None:
                g = self._objects[lay] = _ScalarGroup(lay.skeys, lay.sget)
                self._fast.append(g)
            g.dicts += ds
            g.vals += svals
            g.labels += ls
        if regs and any(regs):           # (most of a cell's registries are empty: no hooks, no buffers...)
            n = len(lay.dkeys)
            if all(lay.private):
                # registry dicts (`_cells`, `_params`) read as attributes: `self.layers.0`
                labs = itertools.chain.from_iterable(map(_repeat, ls, _repeat(n)))
            else:
                labs = [label if private else (label, k) for label in ls for k, private in zip(lay.dkeys, lay.private)]
            reg_dicts += itertools.compress(regs, regs)
            reg_labels += itertools.compress(labs, regs)

    def _visit_registries(self, labels, dicts):
        """Snapshot dict attributes (member values and identities); return their sub-objects."""
        if not dicts:
            return [], []
        types_ = _value_types(dicts)
        rkeys = list(zip(map(tuple, dicts), types_))
        lays = list(map(_REGISTRY_LAYOUTS.get, rkeys))
        if None in lays:
            for i, lay in enumerate(lays):
                if lay is None:
                    lay = _REGISTRY_LAYOUTS.get(rkeys[i])      # (made by an earlier dict of this level?)
                    if lay is None:
                        lay = _RegistryLayout(dicts[i])
                        if all(map(_type_determined, types_[i])):   # else: classified for this dict only
                            _REGISTRY_LAYOUTS[rkeys[i]] = lay
                    lays[i] = lay
        next_labels, next_objs = [], []
        for lay, ds, ls in _by_layout(lays, dicts, labels):
            if lay.guarded:
                g = self._registries.get(lay)
                if g is None:
                    g = self._registries[lay] = _RegistryGroup(lay)
                    self._fast.append(g)
                g.dicts += ds
                g.labels += ls
                if lay.sget is not None:
                    g.svals += map(lay.sget, ds)
                if lay.iget is not None:
                    got = map(lay.iget, ds)
                    g.ids += map(id, itertools.chain.from_iterable(got) if lay.flat else got)
            for k, get in lay.walk:
                next_objs += map(get, ds)
                next_labels += zip(ls, _repeat(k))
            for k in lay.ckeys:
                for d, label in zip(ds, ls):
                    self._containers.add((label, k), d, k)
        return next_labels, next_objs

    def note_capture_writes(self):
        """Called after the capture: a scalar attribute the capture *created* on an object (it was
        not in the object's `__dict__` before) was a side effect of capturing, so the graph may
        have baked what the object looked like without it. Guard that it is still not set (an
        attribute shadowing a class attribute is already guarded through `getattr`).

        Containers are snapshotted again now: the graph holds what the capture read, and a side
        effect of the capture (`log.append(...)`) runs once - it must not fail the next call."""
        if self._containers.holders:
            self._containers.snapshot()
        objs, before = self._objs, self._keys
        if list(map(tuple, map(_DICT_OF, objs))) != before:     # usual case: no object gained a name
            for label, obj, keys in zip(self._labels, objs, before):
                d = obj.__dict__
                if tuple(d) == keys:
                    continue
                keys = set(keys)
                created = [k for k, v in d.items() if k not in keys
                           and not is_jit_private(k) and (type(v) in _SCALARS or isinstance(v, DType))]
                resolved = self._resolved.get(id(obj))
                if created and resolved is not None:     # those already guarded via getattr
                    created = [k for k in created if k not in resolved.keys]
                if created:
                    check = _ResolvedCheck(label, obj, created, [_MISSING] * len(created))
                    self._fast.append(check)
                    self._created[id(obj)] = check
        self._objs = self._keys = self._labels = None   # not needed any more: do not keep them alive

    def failure(self):
        """None while the guarded state is as at compile time, else the first change, worded."""
        for g in self._fast:
            if g.failed():
                return self._explain()
        return None

    # -- wording a failure: the first change in depth-first order, as the cells nest ------------
    def _explain(self):
        if self._index is None:
            self._index = ({id(d): (g, i) for g in self._objects.values() for i, d in enumerate(g.dicts)},
                           {id(d): (g, i) for g in self._registries.values() for i, d in enumerate(g.dicts)})
        seen: dict = {}              # id(object) -> None, in depth-first order
        for label, oid, d in self._roots:
            reason = self._explain_object(label, oid, d, seen)
            if reason is not None:
                return reason
        for oid in seen:             # then the attributes the capture created, in the same order
            check = self._created.get(oid)
            reason = check.failure() if check is not None else None
            if reason is not None:
                return reason
        for g in self._fast:         # something the walk no longer reaches (a dict attribute rebound)
            for i in range(len(getattr(g, "dicts", (0,)))):
                reason = g.explain(i)
                if reason is not None:
                    return reason
        return None

    def _explain_object(self, label, oid, d, seen):
        if oid in seen:
            return None
        seen[oid] = None
        layer = self._layers.get(oid)
        if layer is not None:
            return layer.explain()
        if not isinstance(d, dict) or len(d) > _MAX_DICT:
            return None
        objects, registries = self._index
        check = self._resolved.get(oid)
        reason = check.failure() if check is not None else None
        if reason is not None:
            return reason
        for k, r in list(d.items()):
            hit = registries.get(id(r)) if isinstance(r, dict) and not is_jit_private(k) else None
            if hit is None:
                continue
            g, i = hit
            rlabel = label if k.startswith("_") else f"{label}.{k}"
            reason = g.explain(i, rlabel)
            if reason is not None:
                return reason
            for mk, _ in g.lay.walk:
                m = r.get(mk, _MISSING)
                if m is not _MISSING:
                    reason = self._explain_object(f"{rlabel}.{mk}", id(m), getattr(m, "__dict__", None), seen)
                    if reason is not None:
                        return reason
        hit = objects.get(id(d))
        return hit[0].explain(hit[1], label) if hit is not None else None


def _by_layout(lays, dicts, labels):
    """(layout, its dicts, their labels) for each distinct layout, in order of first appearance."""
    distinct = dict.fromkeys(lays)
    if len(distinct) == 1:
        yield lays[0], dicts, labels
        return
    for lay in distinct:
        sel = list(itertools.compress(range(len(lays)), map(operator.is_, lays, _repeat(lay))))
        yield lay, list(map(dicts.__getitem__, sel)), list(map(labels.__getitem__, sel))


__all__ = ["StateGuard"]
