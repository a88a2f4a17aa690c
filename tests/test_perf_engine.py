"""The performance model's fast paths give the schedule of the plain ones (no RTL).

* beats framed from a static shape are the interpreter's beats, and ``predict`` without the
  interpreter's run gives the same result as with it;
* the interpreter's run cut to the data streams (``run_for``: placeholder tiles where no value
  is read) gives the full run's beats, the values the model reads and the same schedule;
* ``chain`` (three NumPy calls from the costs' offsets) is the recurrence, on spaced sequences
  (the identity) and on waiting ones;
* the forward-and-back sweep, the skipped quiet updates (outputs whose new pops bind nothing,
  new bounds that bind no step) and the exchanges through depth-1 FIFOs reach the same fixed
  point as forward sweeps that recompute every unit: every beat's push and pop, the cycles, the units' stalls and the FIFOs'
  high-water marks; a deadlock stays a deadlock;
* a unit's own output loop in closed form gives the iterated loop's schedule;
* a router takes its next selector element as the group before it ends (its register), and a
  load that the free schedule's memory order starves is served by round robin (no load's first
  request waits more than a turn of the others).
"""

import functools
import warnings

import numpy as np
import pytest

from stepforge.compiler.lower import BUFFERED_DEPTH, lower
from stepforge.perf import Deadlock, model, needs_run, predict
from stepforge.perf.beats import beats_of, shape_beats, static_shape
from stepforge.perf.model import ModelError, data_streams, run_for, value_streams
from stepforge.perf import engine
from stepforge.perf.engine import StepSeq, chain, solve
from stepforge.perf.units import RouterSeq
from stepforge.compiler.types import Tile
from stepforge.contract.tokens import is_stop
from stepforge.sim.ref.interpreter import run

from .test_perf import X, _zip_side, deadlock_program
from .helpers import EXAMPLES
from .test_perf_rtl import _example

CASES = [("matmul", {"M": 8, "K": 8, "N": 8}), ("swiglu", {"B": 8, "H": 8, "I": 8, "t": 8}),
         ("gemv", {"K": 16, "N": 8}), ("moe", {"T": 6, "E": 2}),
         ("moe", {"T": 6, "tiling": "static"})]


def _lowered(name, params):
    program, tensors, inputs = _example(name, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program)
    return hw, run(hw.program, tensors=tensors, inputs=inputs, keep_edges=True)


def _schedule(res):
    return (res.cycles, res.units, res.fifos,
            {n: (e.P.tolist(), e.C.tolist()) for n, e in res.edges.items()})


def test_chain_is_the_recurrence():
    rng = np.random.default_rng(0)
    shortcuts = 0
    for n in (1, 2, 7, 300):
        cost = rng.integers(1, 4, n)
        # spaced by the costs (the shortcut) and by at least 1 or 3 (the shortcut for a step)
        spaced = np.concatenate([[5], 5 + np.cumsum(cost[:-1] + rng.integers(0, 3, n - 1))])
        for a in (rng.integers(0, 50, n), spaced, np.cumsum(rng.integers(3, 5, n))):
            for c, step in ((None, 1), (None, 3), (cost, 1)):
                want = np.empty(n, dtype=np.int64)
                for s in range(n):
                    prev = want[s - 1] + (step if c is None else c[s - 1]) if s else a[0]
                    want[s] = max(a[s], prev)
                assert chain(a.astype(np.int64), c, step).tolist() == want.tolist()
                shortcuts += want.tolist() == a.tolist()
    assert shortcuts >= 12


@pytest.mark.parametrize("name,params", CASES)
def test_beats_framed_from_shapes_are_the_interpreters(name, params):
    hw, ref = _lowered(name, params)
    static = [e.stream for e in hw.edges if static_shape(e.stream) is not None]
    assert static
    for s in static:
        got, want = shape_beats(static_shape(s)), beats_of(ref.edges[s])
        assert got.has.tolist() == want.has.tolist() and got.stop.tolist() == want.stop.tolist()
    if name == "moe":       # routers read their selectors: the interpreter's run is needed
        assert needs_run(hw)
        with pytest.raises(ValueError, match="needs the interpreter's run of moe"):
            predict(hw)
    else:
        assert not needs_run(hw)
        assert _schedule(predict(hw)) == _schedule(predict(hw, ref))


@pytest.mark.parametrize("params", [{"T": 6, "E": 2}, {"T": 8, "tiling": "static"},
                                    {"T": 8, "tiling": "bounded"},
                                    {"T": 8, "E": 4, "tiling": "static", "regions": 2}])
def test_cut_run_gives_the_full_runs_beats_values_and_schedule(params):
    program, tensors, inputs = _example("moe", params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program)
    full = run(hw.program, tensors=tensors, inputs=inputs, keep_edges=True)
    cut = run_for(hw, tensors, inputs)
    assert not cut.full
    values = value_streams(hw)
    for s in data_streams(hw):
        got, want = beats_of(cut.edges[s]), beats_of(full.edges[s])
        assert got.has.tolist() == want.has.tolist() and got.stop.tolist() == want.stop.tolist()
        assert got.rows().tolist() == want.rows().tolist()
        if s in values and not isinstance(s.dtype, Tile):     # selectors (tiles: rows only)
            assert [repr(v) for v in got.values] == [repr(v) for v in want.values]
    # some tiles were not computed: a placeholder of zeros where the full run has data
    assert any(not is_stop(a) and isinstance(a, np.ndarray) and a.any() and not b.any()
               for s in cut.edges for a, b in zip(full.edges[s], cut.edges[s])
               if not is_stop(b))
    assert _schedule(predict(hw, cut)) == _schedule(predict(hw, full))


@pytest.mark.parametrize("name,params", CASES)
def test_fast_fixed_point_is_the_plain_one(name, params, monkeypatch):
    hw, ref = _lowered(name, params)
    skipped = []
    bounds_quiet = StepSeq._bounds_quiet
    monkeypatch.setattr(StepSeq, "_bounds_quiet",
                        lambda self, *a: skipped.append(bounds_quiet(self, *a)) or skipped[-1])
    fast = _schedule(predict(hw, ref))
    assert any(skipped)         # some update was skipped for bounds that bind no step
    monkeypatch.setattr(StepSeq, "skip_quiet", False)
    monkeypatch.setattr(model, "solve", functools.partial(solve, backwards=False, exchange=False))
    assert _schedule(predict(hw, ref)) == fast


def test_exchanges_through_a_single_entry_settle_a_loop_in_a_few_rounds(monkeypatch):
    # MoE's selector reader (one beat per memory line) feeds its Broadcast through one entry:
    # the reader pushes beat j after the Broadcast popped beat j - 1, every beat. Each round of
    # the whole graph settled one beat of that loop; exchanging the two units settles it at once
    hw, ref = _lowered("moe", {"T": 16, "tiling": "static"})
    one = {"sel": 1}
    fast = predict(hw, ref, depths=one)
    monkeypatch.setattr(model, "solve", functools.partial(solve, exchange=False))
    slow = predict(hw, ref, depths=one)
    assert _schedule(fast) == _schedule(slow)
    assert slow.rounds >= 10 and fast.rounds <= 6


def test_fast_fixed_point_keeps_deadlocks_and_their_threshold(monkeypatch):
    p = deadlock_program()
    _, side = _zip_side(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(p, depths={side: 13})
    ref = run(hw.program, {"X": X}, keep_edges=True)
    fast = {d: _schedule(predict(hw, ref, depths={side.name: d})) for d in (14, 16, 20)}
    with pytest.raises(Deadlock):
        predict(hw, ref)
    monkeypatch.setattr(StepSeq, "skip_quiet", False)
    monkeypatch.setattr(model, "solve", functools.partial(solve, backwards=False, exchange=False))
    with pytest.raises(Deadlock):
        predict(hw, ref)
    assert {d: _schedule(predict(hw, ref, depths={side.name: d})) for d in fast} == fast


@pytest.mark.parametrize("name,params", CASES)
def test_closed_form_output_loop_is_the_iterated_one(name, params, monkeypatch):
    hw, ref = _lowered(name, params)
    closed = []
    plain = engine._closed_form
    monkeypatch.setattr(engine, "_closed_form", lambda *a: closed.append(plain(*a)) or closed[-1])
    fast = _schedule(predict(hw, ref))
    assert any(closed)
    monkeypatch.setattr(engine, "_closed_form", lambda *a: False)
    assert _schedule(predict(hw, ref)) == fast


def test_a_loads_one_pass_updates_are_its_iterated_slot_loop(monkeypatch):
    """A load whose slot loop closes is updated without iterating, alone at the memory and with
    its order set (``LoadActor._alone``, ``_ordered``): the schedule of the iterated loop. (The
    CASES' loads have fewer tiles than their buffers: no slot waits.)"""
    from stepforge.perf.offchip import LoadActor
    hw, ref = _lowered("gemv", {"K": 32, "N": 16})
    used = []
    for path in ("_alone", "_ordered"):
        plain = getattr(LoadActor, path)
        monkeypatch.setattr(LoadActor, path, lambda self, *a, plain=plain, path=path:
                            used.append(path) or plain(self, *a))
    fast = _schedule(predict(hw, ref))
    assert "_alone" in used and "_ordered" in used
    closes = LoadActor._closed_slots

    def iterated(self):
        closes(self)
        self._closed = False
    monkeypatch.setattr(LoadActor, "_closed_slots", iterated)
    used.clear()
    assert _schedule(predict(hw, ref)) == fast and used == []


def _trace_moe(tiling):
    from stepforge.loader import load, load_trace
    pf = load(EXAMPLES / "moe.py")
    tr = load_trace(EXAMPLES.parent / "traces" / "moe_skewed_t32_e4_top2.json")
    program = pf.build(**{**tr.get("params", {}), "tiling": tiling})
    data = pf.data(program, seed=1, trace=tr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program)
    return hw, run_for(hw, data.get("tensors", {}), data.get("inputs", {}))


def test_a_router_takes_its_next_selector_as_the_group_before_it_ends():
    hw, ref = _trace_moe("static")
    edges, actors, mem = model.build(hw, ref)
    assert model._settle(edges, actors, mem) is not None
    routers = [a for a in actors if isinstance(a, RouterSeq)]
    assert {type(u.node).__name__ for u in hw.units if u.name in {a.name for a in routers}} \
        == {"Partition", "Reassemble"}
    for a in routers:
        sel, first = a.sel, a._sel_prev + 1
        first[a._first] = 0
        starts = a.T[first]
        # element j is taken the cycle after it arrives, or with the last beat of group j - 1
        # (``arrived``: its push, a cycle later behind a buffered queue's extra stage)
        arrived = sel.P + (1 if sel.depth >= BUFFERED_DEPTH else 0)
        assert (sel.arrived == arrived).all() and sel.lag == (sel.depth >= BUFFERED_DEPTH)
        want = np.maximum(arrived + 1, np.where(a._first, arrived + 1, a.T[a._sel_prev]))
        assert sel.C.tolist() == want.tolist()
        # and its group's first beat moves at least two cycles after its arrival
        assert (starts >= arrived + 2).all() and (starts > sel.C).all()
        # waiting for the selector counts as waiting for an input
        a_in, _ = a._stall_bounds()
        assert a_in[first].tolist() == np.maximum(a_in[first], sel.P + 2).tolist()


def test_a_starved_load_is_served_by_round_robin(monkeypatch):
    hw, ref = _trace_moe("static")
    got = {}
    for passes in (0, model.ROUND_ROBIN_PASSES):
        monkeypatch.setattr(model, "ROUND_ROBIN_PASSES", passes)
        edges, actors, mem = model.build(hw, ref)
        assert model._settle(edges, actors, mem) is not None
        got[passes] = (mem.starved(), predict(hw, ref).cycles)
    # the free schedule's order makes an expert's weights wait behind the selector stream's and
    # the tokens' lines; round robin serves them within a turn (Verilator: 360 cycles)
    assert got[0][0] and not got[model.ROUND_ROBIN_PASSES][0]
    assert got[0][1] > got[model.ROUND_ROBIN_PASSES][1]


def _host_attention():
    from .test_attention_rtl import SMALL, _case
    pf, program, tensors, inputs = _case(addressing="host", mode="interleaved")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program, SMALL)
    return hw, run(hw.program, tensors=tensors, inputs=inputs, keep_edges=True)


def test_round_robin_passes_go_on_while_the_memory_idles_with_a_reader_waiting(monkeypatch):
    # host-addressed decode attention on one 8-byte channel: the ordered pass starves the key
    # and value loads' first requests; the first round-robin pass, made from that schedule,
    # moves the requests, and the address stream's lines then wait behind loads' lines
    # requested after them while the memory idles (238 cycles, Verilator 182): no round robin
    # does that, so the order is made again from the new schedule, until no reader starves
    hw, ref = _host_attention()
    got = {}
    for passes in (1, model.ROUND_ROBIN_PASSES):
        monkeypatch.setattr(model, "ROUND_ROBIN_PASSES", passes)
        edges, actors, mem = model.build(hw, ref)
        assert model._settle(edges, actors, mem) is not None
        got[passes] = (mem.idle_while_waiting(), mem.starved(), predict(hw, ref).cycles)
    assert got[1][:2] == (True, True) and got[1][2] > 230
    assert got[model.ROUND_ROBIN_PASSES][:2] == (False, False)
    assert abs(got[model.ROUND_ROBIN_PASSES][2] - 182) <= 18         # Verilator: 182


def test_an_expand_takes_its_element_with_the_last_copy():
    # hdl/expand.py: every copy reads the element straight from in0 (the first needs it there),
    # and the data beat is taken with the reference beat that ends its repetition
    from stepforge.perf.units import ExpandSeq
    for hw, ref in ((lower(deadlock_program()), None), _host_attention()):
        edges, actors, mem = model.build(hw, ref)
        assert model._settle(edges, actors, mem) is not None
        b = {u.name: u.node.b for u in hw.units if type(u.node).__name__ == "Expand"}
        seqs = [a for a in actors if isinstance(a, ExpandSeq)]
        assert {a.name for a in seqs} == set(b)
        for a in seqs:
            x, r, out = a._x, a.ins[0][0], a.outs[0][0]
            ends = np.flatnonzero(r.info.stop >= b[a.name])
            assert len(ends) == x.n
            assert x.C.tolist() == a.T[ends].tolist()              # popped with the last copy
            first = np.concatenate([[0], ends[:-1] + 1])
            assert (a.T[first] >= x.P + 1).all()                   # the first copy needs it
            assert out.P.tolist() == a.T.tolist() == r.C.tolist()  # one copy a reference beat


@pytest.mark.parametrize("name,params", CASES)
def test_report_figures_are_the_per_step_ones(name, params):
    """A unit's stalls (the inputs' share of ``T - prev``, which telescopes) are the sums of its
    per-step waits, and the FIFOs' high-water marks taken at once are each FIFO's own."""
    hw, ref = _lowered(name, params)
    edges, actors, mem = model.build(hw, ref, model.Timing())
    assert model._settle(edges, actors, mem) is not None
    seqs = [a for a in actors if isinstance(a, StepSeq) and a.S]
    assert seqs
    waited = 0
    for a in seqs:
        w_in, w_out = a.stalls()
        assert (w_in, w_out) == (int(a.wait_in.sum()), int(a.wait_out.sum()))
        waited += w_in + w_out
    assert waited > 0
    high = model._high_waters(list(edges.values()))
    assert high == {name: model._high_water(e) for name, e in edges.items()}
    assert max(high.values()) >= 2


def test_a_port_in_every_step_needs_no_index_array():
    a, b = engine.Edge("a", 5, 2), engine.Edge("b", 5, 1)
    c, d = engine.Edge("a", 5, 2), engine.Edge("b", 5, 1)
    a.P = np.array([0, 4, 5, 9, 10])
    c.P = a.P
    every = StepSeq("u", [1, 2, 1, 1, 3], [(a, None)], [(b, None, 2, 1)], pop_off=1)
    listed = StepSeq("u", [1, 2, 1, 1, 3], [(c, np.arange(5))], [(d, np.arange(5), 2, 1)],
                     pop_off=np.ones(5, dtype=np.int64))
    for u in (every, listed):
        u.update()
    assert every.T.tolist() == listed.T.tolist() == [1, 5, 7, 10, 11]
    assert b.P.tolist() == d.P.tolist() == [3, 7, 9, 12, 13]
    assert a.C.tolist() == c.C.tolist() == [2, 6, 8, 11, 12]
    with pytest.raises(AssertionError, match="has 5 beats, not one in each of its 4 steps"):
        StepSeq("v", [1, 1, 1, 1], [(engine.Edge("e", 5, 2), None)])


def test_a_second_solve_updates_only_what_changed_since():
    """What an actor has not seen is kept on it: solved again, nothing moves; a new bound on
    one unit's input updates that unit and, through the pops it moves, its producer."""
    e, f = engine.Edge("e", 4, 1), engine.Edge("f", 4, 2)
    src = StepSeq("src", np.ones(4, np.int64), outs=[(e, None, 1, 1)])
    mid = StepSeq("mid", np.full(4, 3, np.int64), ins=[(e, None)], outs=[(f, None, 3, 2)],
                  pop_off=2)
    dst = StepSeq("dst", np.ones(4, np.int64), ins=[(f, None)])
    actors = [src, mid, dst]
    updates = []
    for a in actors:
        plain = a.update
        a.update = lambda plain=plain, a=a: updates.append(a.name) or plain()
    assert solve(actors) == 2
    # through one entry each beat waits for the pop of the one before it (3 cycles a beat)
    assert (e.P.tolist(), e.C.tolist(), f.P.tolist()) == ([1, 5, 9, 13], [4, 8, 12, 16],
                                                          [5, 9, 13, 17])
    updates.clear()
    assert solve(actors) == 1 and updates == []
    # the consumer starts at 20 (a change the caller marks): its pops move, its producer's
    # last two results wait for room, and nothing upstream of it updates
    dst.t0 = 20
    dst._dirty = dst._fwd_moved = True
    assert solve(actors) == 2
    assert updates == ["dst", "mid", "dst"]
    assert (f.P.tolist(), f.C.tolist()) == ([5, 9, 21, 22], [20, 21, 22, 23])
    assert (e.P.tolist(), mid.T.tolist()) == ([1, 5, 9, 13], [2, 6, 10, 14])


def _round_robin_reference(live, grants, lag):
    """The round robin of ``Memory.round_robin_order``, cycle by cycle and plainly: in each
    cycle the first client after the last one granted whose next line is requested and all of
    whose dependencies (the lines granted, plus their lag, before its request) are served."""
    n = len(live)
    arrive = [np.repeat(c.times, c.lines) for c in live]
    granted = np.concatenate([np.repeat(g + d - 1, c.lines)
                              for c, g, d in zip(live, grants, lag)])
    base = np.cumsum([0] + [len(a) for a in arrive])
    served = np.zeros(len(granted), dtype=bool)
    nxt, order, ptr = [0] * n, [], n - 1
    t = min(int(a[0]) for a in arrive if len(a))
    while len(order) < len(granted):
        for d in range(1, n + 1):
            i = (ptr + d) % n
            k = nxt[i]
            if k < len(arrive[i]) and arrive[i][k] <= t \
                    and served[granted < arrive[i][k]].all():
                order.append(base[i] + k)
                served[base[i] + k] = True
                nxt[i], ptr, t = k + 1, i, t + 1
                break
        else:
            t = max(t + 1, min(int(arrive[i][nxt[i]]) for i in range(n)
                               if nxt[i] < len(arrive[i])))
    return order


@pytest.mark.parametrize("speculate", [None, 1, 3])
def test_round_robin_order_is_the_cycle_by_cycle_arbiter(speculate, monkeypatch):
    # the arbiter grants chunks without the dependencies and checks them afterwards: small
    # chunks start it over at many places, the default one mostly at the first
    from types import SimpleNamespace
    from stepforge.perf import memory
    from stepforge.perf.memory import Memory
    if speculate:
        monkeypatch.setattr(memory, "SPECULATE", speculate)
    rng = np.random.default_rng(11)
    for _ in range(300):
        live, grants, lag = [], [], []
        for _ in range(int(rng.integers(1, 7))):
            count, lines = int(rng.integers(1, 30)), int(rng.choice([1, 1, 1, 2, 4]))
            times = np.sort(rng.integers(0, 150, count)).astype(np.int64)
            live.append(SimpleNamespace(times=times, lines=lines, count=count, kind="read"))
            grants.append(times + rng.integers(lines - 1, 60, count))
            lag.append(int(rng.integers(1, 10)))
        got = Memory.round_robin_order(SimpleNamespace(live=live), grants, lag)
        assert got.tolist() == _round_robin_reference(live, grants, lag)


def test_a_round_robin_pass_whose_order_repeats_ends_the_passes(monkeypatch):
    # a pass whose order is the last one's would solve the same order from the same point: the
    # model stops there, with the schedule that solving it again gives
    from stepforge.perf.memory import Memory
    hw, ref = _trace_moe("static")
    monkeypatch.setattr(Memory, "round_robin_order", lambda self, grants, lag: self.order.copy())
    skipped = predict(hw, ref)
    places = iter(range(1 << 20))
    monkeypatch.setattr(model, "first_change", lambda a, b: next(places))
    monkeypatch.setattr(model, "ROUND_ROBIN_PASSES", 3)
    solved = predict(hw, ref)
    assert _schedule(skipped) == _schedule(solved) and skipped.rounds < solved.rounds


def test_round_robin_passes_end_on_an_order_that_is_its_own_schedules_round_robin(monkeypatch):
    # SwiGLU B16 H32 I32 on the ECP5 (Verilator: 1,680 cycles): each pass's order agrees with
    # the next one's over a longer prefix than the last pass's did, and the last order is the
    # round robin of its own schedule (docs/perf.md, 2026-11-28 (session 19))
    from stepforge.hdl.config import HardwareConfig
    from stepforge.loader import load
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(load(EXAMPLES / "swiglu.py").build(B=16, H=32, I=32),
                   HardwareConfig.ecp5_85f())
    places = []
    first_change = model.first_change

    def recorded(a, b):
        places.append(first_change(a, b))
        return places[-1]
    monkeypatch.setattr(model, "first_change", recorded)
    edges, actors, mem = model.build(hw, None)
    assert model._settle(edges, actors, mem) is not None
    assert len(places) > 2 and places[-1] is None
    assert all(a < b for a, b in zip(places[:-1], places[1:-1]))
    assert mem.starved()            # its first Wd line waits: only the fixed point ended it
    again = mem.round_robin_order([c.last for c in mem.live], model._lags(mem, model.Timing()))
    assert engine.same(again, mem.order)
    assert abs(predict(hw).cycles - 1_680) <= 0.02 * 1_680


def test_the_cut_run_refuses_a_cyclic_program_before_running_it():
    """``run_for`` names the cycle as ``predict`` does (the interpreter's cut run of decode
    attention's feedback dispatch raised a ``KeyError``)."""
    program, tensors, inputs = _example("decode_attention", {"mode": "dynamic"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hw = lower(program)
    with pytest.raises(ModelError, match="does not model cycles: decode_attention closes one"):
        run_for(hw, tensors, inputs)
