"""A PCU's plan: the node circuits of its function's expression graph, their steps, and the
pipeline schedule (:meth:`_Plan._pipeline`, checked by :meth:`_Plan._safe`)."""

from ...compiler.types import Tile
from ..tile_ops import ElementwiseNode, MatmulNode, RowReduceNode
from .checks import _check_hw_type, _is_dynamic, _tiles

__all__ = []

_ELEMENTWISE = ("add", "sub", "mul", "div", "maximum", "cast", "exp", "silu", "rsqrt")
_WIRING = ("arg", "const", "get", "tuple")


class _Plan:
    """The planning half of :class:`~stepforge.hdl.pcu.PCU` (a mixin): from the function's
    expression graph to node circuits, their steps (``ii``) and their latencies."""

    def _plan(self):
        """Turn the expression graph into node circuits (fusing ``acc + matmul`` into ``mac``)
        and lay out their steps."""
        typed = self.fn.expression_types(*self._arg_types)
        self._types = {id(e): t for e, t in typed}
        uses = {}
        for e, _ in typed:
            for a in e.args:
                uses[id(a)] = uses.get(id(a), 0) + 1
        fused, skipped = {}, set()
        for e, t in typed:
            if e.op != "add" or not isinstance(t, Tile):
                continue
            for x, mm in (e.args, e.args[::-1]):
                if (mm.op == "matmul" and uses.get(id(mm), 0) == 1 and id(mm) not in skipped
                        and self._types[id(x)] == t and self._types[id(mm)] == t):
                    fused[id(e)] = (x, mm)
                    skipped.add(id(mm))
                    break
        self._fused, self._skipped = fused, skipped
        self._order = [e for e, _ in typed if id(e) not in skipped]
        self._check_row_independent(typed)
        self._nodes = {}
        step = 0
        for idx, e in enumerate(self._order):
            if e.op in _WIRING:
                continue
            _check_hw_type(self._types[id(e)], f"{e.op} in {self.fn!r}")
            name = f"n{idx}_{e.op if id(e) not in fused else 'mac'}"
            node = self._node(e, name)
            node.start = step
            step += node.steps
            self._nodes[id(e)] = node
        self.ii = max(step, 1)
        self._pipeline()

    def _pipeline(self):
        """Choose every node's latency (0 or its pipelined depth) and issue delay.

        Node ``j`` issues its steps ``D_j`` pipeline moves after the sequencer, ``D_j`` the sum of
        the latencies of the nodes before it, and writes them ``latency_j`` moves later; the
        beat's result reaches the output stage ``L = D_last + latency_last`` moves after its
        last step. A choice is kept only if every value is read while it holds the beat's data
        (:meth:`_safe`); among those, the one that pipelines the most multipliers and lanes, then
        the shortest ``L``. Sets ``latency`` (``L``), ``_delay`` (``D`` by node) and ``_merged``.
        """
        timed = [e for e in self._order if id(e) in self._nodes]
        nodes = [self._nodes[id(e)] for e in timed]
        index = {id(e): k for k, e in enumerate(timed)}
        self._merged = self._merged_mac(timed)
        issue_reads, late_reads = [], []
        for e in timed:
            if id(e) in self._fused:
                x, mm = self._fused[id(e)]
                late, early = [x], list(mm.args)
            elif e.op == "mac":
                late, early = [e.args[0]], list(e.args[1:])
            else:
                late, early = [], list(e.args)
            if id(e) == self._merged:
                late = []
            reads = set().union(*(self._sources(a, index) for a in early))
            if self._nodes[id(e)].early_inputs:  # it reads the ports at the sequencer's issue
                reads.discard("input")
            issue_reads.append(reads)
            late_reads.append(set().union(*(self._sources(a, index) for a in late)))
        out_reads = self._sources(self.fn.body, index)
        mins = [n.steps_for(0) for n in nodes]
        cands = [k for k, n in enumerate(nodes) if n.depth]
        if len(cands) > 10:  # too many to try every subset: the last node alone, or none
            cands = [k for k in cands if k == len(nodes) - 1]
        best = None
        for mask in range(1 << len(cands)):
            lat = [0] * len(nodes)
            for bit, k in enumerate(cands):
                if mask >> bit & 1:
                    lat[k] = nodes[k].depth
            delay = [sum(lat[:k]) for k in range(len(nodes))]
            late = [(lat[k] - 1, lat[k]) if lat[k] and getattr(nodes[k], "split", None)
                    else (lat[k],) for k in range(len(nodes))]
            if not self._safe(lat, delay, mins, issue_reads, late_reads, out_reads, late):
                continue
            total = sum(lat)
            score = (sum(getattr(nodes[k], "multipliers", 0) + getattr(nodes[k], "lanes", 0)
                         for k in range(len(nodes)) if lat[k]), -total)
            if best is None or score > best[0]:
                best = (score, lat, delay)
        _, lat, delay = best
        for node, d in zip(nodes, lat):
            node.latency = d
        self._delay = {id(e): d for e, d in zip(timed, delay)}
        self.latency = sum(lat)

    @staticmethod
    def _safe(lat, delay, mins, issue_reads, late_reads, out_reads, late):
        """Whether every read sees its beat's value, in every schedule of the beats (relative to
        a beat's first step, with dynamic nodes at their fewest steps, ``mins``, where that is
        the worst case). Node ``k``'s register holds its result from ``V_k`` until the next
        beat's first write of it, at least ``pre_k + D_k + latency_k`` after that beat starts
        (``pre_k``: the fewest steps before node ``k``); inputs are held until the beat's last
        step; the accumulator changes at the output stage. ``late[j]``: the moves after its
        issue at which node ``j`` reads ``late_reads[j]`` (a mac's accumulator operand)."""
        n = len(lat)
        L = delay[-1] + lat[-1] if n else 0
        pre = [sum(mins[:k]) for k in range(n)]
        post = [sum(mins[k + 1:]) for k in range(n)]

        def ok(src, t, j):  # node j reads src at t moves after it issues a step
            if src == "input":
                return t <= post[j]
            if src == "acc":
                return pre[j] + t >= L
            return t - 1 - post[j] <= pre[src] + delay[src] + lat[src]
        for j in range(n):
            if not all(ok(src, delay[j], j) for src in issue_reads[j]):
                return False
            for t in late[j]:
                if not all(ok(src, delay[j] + t, j) for src in late_reads[j]):
                    return False
        for src in out_reads:
            if src == "input" and L:
                return False
            if isinstance(src, int) and src != n - 1 and L - 1 > pre[src] + delay[src] + lat[src]:
                return False
        return True

    def _sources(self, e, index):
        """What the value of ``e`` is read from: node indices, ``"input"`` (a port),
        ``"acc"`` (the accumulator)."""
        if id(e) in index:
            return {index[id(e)]}
        if e.op == "arg":
            return {"acc"} if self.mode != "map" and e.attrs["index"] == 0 else {"input"}
        return set().union(*(self._sources(a, index) for a in e.args))

    def _merged_mac(self, timed):
        """The ``acc + a @ w`` node that adds into the accumulator itself: the function's body,
        the last node, whose accumulator operand is the accumulator argument and its only use;
        ``None`` if there is none."""
        if self.mode == "map" or not timed or timed[-1] is not self.fn.body:
            return None
        e = timed[-1]
        if id(e) in self._fused:
            x = self._fused[id(e)][0]
        elif e.op == "mac":
            x = e.args[0]
        else:
            return None
        if x.op != "arg" or x.attrs["index"] != 0 or not isinstance(self.init.type, Tile):
            return None
        uses = sum(1 for y in self.fn.expressions() for a in y.args
                   if a.op == "arg" and a.attrs["index"] == 0)
        return id(e) if uses == 1 else None

    def _check_row_independent(self, typed):
        """Values with a dynamic row count may only flow row by row: every such value has the
        inputs' row count, and a matmul's right operand is static."""
        for e, t in typed:
            if e.op in ("matmul", "mac"):
                b = self._types[id(e.args[-1])]
                if _is_dynamic(b):
                    raise ValueError(f"PCU: {e.op} in {self.fn!r} over inputs "
                                     f"{list(self.in_types)!r} has a right operand {b!r} with a "
                                     f"dynamic row count; only the left operand's rows may be "
                                     f"dynamic (a row-independent function)")
            for x in _tiles(t):
                if not isinstance(x.cols, int) or _is_dynamic(x) and x.rows != self.dyn_rows:
                    raise ValueError(f"PCU: {e.op} in {self.fn!r} gives {x!r} over inputs "
                                     f"{list(self.in_types)!r}; only rows may be dynamic, with "
                                     f"the inputs' row count")

    def _rows(self, t):
        """The rows of tile type ``t`` in hardware: its row count, or the bound of a dynamic one."""
        return self.dyn_bound if _is_dynamic(t) else t.rows

    def _node(self, e, name):
        t = self._types[id(e)]
        if id(e) in self._fused:
            x, mm = self._fused[id(e)]
            a, w = (self._types[id(v)] for v in mm.args)
            return MatmulNode(a.dtype, t.dtype, self._rows(a), a.cols, t.cols,
                              mm.attrs["transpose_b"], True, self.multipliers, name,
                              dynamic=_is_dynamic(a), family=self.family)
        if e.op in ("matmul", "mac"):
            a = self._types[id(e.args[0 if e.op == "matmul" else 1])]
            return MatmulNode(a.dtype, t.dtype, self._rows(a), a.cols, t.cols,
                              e.attrs["transpose_b"], e.op == "mac", self.multipliers, name,
                              dynamic=_is_dynamic(a), family=self.family)
        if e.op in ("row_sum", "row_max"):
            x = self._types[id(e.args[0])]
            return RowReduceNode(e.op, t.dtype, self._rows(x), x.cols, self.lanes, name,
                                 dynamic=_is_dynamic(x))
        if e.op in _ELEMENTWISE:
            tiles = [self._types[id(a)] for a in e.args if self._types[id(a)] is not None]
            return ElementwiseNode(e.op, e.attrs, tiles[0].dtype, t.dtype, self._rows(t), t.cols,
                                   self.lanes, name, dynamic=_is_dynamic(t), family=self.family)
        raise ValueError(f"PCU: no circuit for {e.op!r}")
