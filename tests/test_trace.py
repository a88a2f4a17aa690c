"""Traces: a JSON file of parameters and host inputs (e.g. MoE routing) for ``check`` and ``run``."""

import json
from pathlib import Path

import pytest

from stepforge.cli import main
from stepforge.loader import load, load_trace

ROOT = Path(__file__).resolve().parent.parent
MOE = ROOT / "examples" / "moe.py"
SKEWED = ROOT / "traces" / "moe_skewed_t32_e4_top2.json"


def _write(tmp_path, obj, name="t.json"):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def test_the_shipped_trace_routes_every_token_to_two_experts():
    trace = load_trace(SKEWED)
    assert trace["params"] == {"T": 32, "E": 4, "k": 2}
    pf = load(MOE)
    program = pf.build(**trace["params"])
    sel = pf.data(program, trace=trace)["inputs"]["sel"][0]
    assert len(sel) == 32 and all(bin(m).count("1") == 2 for m in sel)
    assert sel == [sum(1 << e for e in r) for r in trace["routing"]]


def test_check_with_a_trace_evaluates_the_symbolic_metrics(capsys):
    assert main(["check", str(MOE), "-p", "tiling=dynamic", "--trace", str(SKEWED)]) == 0
    out = capsys.readouterr().out
    assert "off-chip bytes read          256*nonzero(N_sel_0) + 256*nonzero(N_sel_1)" in out
    # every one of the four experts gets a token: 4 weight reads of 256 B plus 32 tokens of 16 B
    assert "with trace" in out and "off-chip bytes read          1536" in out


def test_run_with_a_trace_matches_numpy(capsys):
    assert main(["run", str(MOE), "--level", "ref", "--trace", str(SKEWED)]) == 0
    out = capsys.readouterr().out
    assert "Y       ok     bit-exact" in out


def test_command_line_params_override_the_trace(tmp_path, capsys):
    trace = _write(tmp_path, {"params": {"T": 4, "E": 2}, "routing": [[0], [1], [0, 1], [1]]})
    assert main(["run", str(MOE), "--level", "ref", "--trace", str(trace), "-p", "N=8"]) == 0
    assert main(["run", str(MOE), "--level", "ref", "--trace", str(trace), "-p", "T=6"]) == 2
    assert ("error: moe: the trace's routing must list the experts of each of the 6 tokens, got 4"
            in capsys.readouterr().err)


def test_trace_inputs_replace_generated_inputs(tmp_path):
    pf = load(MOE)
    program = pf.build(T=3, E=2)
    data = pf.data(program, trace={"inputs": {"sel": [[1, 2, 3]]}})
    assert data["inputs"]["sel"] == [[1, 2, 3]]


@pytest.mark.parametrize("routing,message", [
    ([[0], [2], [1]], r"token 1 of the trace is routed to \[2\]; expected distinct expert ids in 0..1"),
    ([[0], [1, 1], [1]], r"token 1 of the trace is routed to \[1, 1\]"),
    ([[0], [], [1]], r"token 1 of the trace is routed to \[\]"),
])
def test_bad_routing_is_named(routing, message):
    pf = load(MOE)
    with pytest.raises(SystemExit, match=message):
        pf.data(pf.build(T=3, E=2), trace={"routing": routing})


def test_a_program_without_trace_support_refuses_unknown_keys():
    pf = load(ROOT / "examples" / "matmul.py")
    with pytest.raises(SystemExit, match=r"matmul.py: data\(\) takes no trace, but the trace has "
                                         r"routing besides name, description, source, params, inputs"):
        pf.data(pf.build(M=8, K=8, N=8), trace={"routing": []})


@pytest.mark.parametrize("text,message", [
    ("[1, 2]", r"a trace is a JSON object, not list"),
    ("{nope", r"not a JSON trace"),
    ('{"params": [1]}', r"the trace's 'params' must be an object"),
])
def test_malformed_traces(tmp_path, text, message):
    with pytest.raises(SystemExit, match=message):
        load_trace(_write(tmp_path, text))
    with pytest.raises(SystemExit, match=r"cannot read the trace"):
        load_trace(tmp_path / "missing.json")
