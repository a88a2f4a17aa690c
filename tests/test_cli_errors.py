"""Everything a user can get wrong on the command line ends in words, never a traceback.

Each case is a malformed program file, parameter, trace, output path or option, run through
``stepforge.cli.main`` in this process: the exit status is the documented one
(``stepforge.loader.EXIT_CODES``: 2 for bad input, 130 for Ctrl-C), stderr holds
``error: <what and where>``, and no ``Traceback`` appears anywhere.
"""

import json
from pathlib import Path

import pytest

from stepforge import cli
from stepforge.cli import main
from stepforge.loader import EXIT_CODES, ProgramError, load

ROOT = Path(__file__).resolve().parent.parent
GEMV = str(ROOT / "examples" / "gemv.py")
MOE = str(ROOT / "examples" / "moe.py")

GOOD = """from stepforge import *
def program(K=8, scale=1.0, fast=False, name='x'):
    p = Program('good')
    X = p.tensor('X', (1, K), int16)
    Y = p.tensor('Y', (1, K), int16, role='output')
    LinearOffChipStore(LinearOffChipLoad(X, (1, 4), out_shape=(K // 4,), stride=(1,)), Y)
    return p
"""

INPUTS = """import numpy as np
from stepforge import *
def program():
    p = Program('inputs')
    R = p.symbol('R', bound=3, ragged=True)
    x = p.input('x', [2, R], Tile(int16, 1, 2))
    s = p.input('s', [1, 2], Select(2))
    p.output(x, 'y')
    p.output(s, 'z')
    return p
def data(program, seed=0):
    return {'inputs': {'x': [[], []], 's': [[1, 2]]}}
"""

#: (file name, its text, extra arguments, a piece of the message)
PROGRAMS = [
    ("syntax.py", "def program(:\n", [], "does not parse: invalid syntax"),
    ("indent.py", "def program():\nreturn 1\n", [], "does not parse: expected an indented block"),
    ("tabs.py", "def program():\n\tif 1:\n        return 1\n", [], "does not parse"),
    ("missing_module.py", "import no_such_module\n", [],
     "importing it raised ModuleNotFoundError: No module named 'no_such_module'"),
    ("raises_at_import.py", "raise ValueError('nope')\n", [], "importing it raised ValueError: nope"),
    ("name_error.py", "x = undefined_name\n", [], "NameError: name 'undefined_name' is not defined"),
    ("empty.py", "", [], "defines no program() function"),
    ("no_program.py", "def programme():\n    pass\n", [], "defines no program() function"),
    ("not_callable.py", "program = 3\n", [], "defines program as int, not a function"),
    ("returns_none.py", "def program():\n    pass\n", [], "program() returned NoneType, not a Program"),
    ("returns_int.py", "def program():\n    return 3\n", [], "program() returned int, not a Program"),
    ("divides.py", "def program():\n    return 1 / 0\n", [],
     "program() raised ZeroDivisionError: division by zero"),
    ("helper.py", "def helper(n):\n    return [][n]\n\ndef program():\n    return helper(2)\n", [],
     "program() raised IndexError: list index out of range"),
    ("shape.py", "from stepforge import *\ndef program():\n    p = Program('b')\n"
                 "    x = p.input('x', [4, 4], Index())\n    Flatten(x, 0, 5)\n    return p\n", [],
     "StepShapeError: Flatten_0: port 'in0' needs hi in 1..1, got 5"),
    ("tile.py", "from stepforge import *\ndef program():\n    p = Program('b')\n"
                "    X = p.tensor('X', (6, 6), int8)\n    LinearOffChipLoad(X, (4, 4), (1,), (1,))\n"
                "    return p\n", [], "tile [4, 4] does not divide tensor X [6, 6]"),
    ("type.py", "from stepforge import *\ndef program():\n    p = Program('b')\n"
                "    x = p.input('x', [4], Index())\n    Map(lambda a: a + 1, x)\n    return p\n", [],
     "StepTypeError: Map_0"),
    ("required.py", "def program(K):\n    pass\n", [], "program() needs K (-p K=...); it takes K"),
    ("exits.py", "import sys\ndef program():\n    sys.exit('my own message')\n", [], "my own message"),
    ("binary.py", b"\xff\xfe\x00\x01def", [], "does not parse"),
    ("program.txt", "def program():\n    pass\n", [], "not a Python file"),
    ("args.py", "def program(*args):\n    raise TypeError('bad')\n", [], "program() raised TypeError: bad"),
    ("deep.py", "import json\ndef program():\n    return json.loads('{')\n", [],
     "program() raised JSONDecodeError"),
]


def _run(capsys, argv):
    status = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return status, out, err


def _write(path, text):
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


@pytest.mark.parametrize("name,text,extra,message", PROGRAMS, ids=[c[0] for c in PROGRAMS])
def test_malformed_program_files(tmp_path, capsys, name, text, extra, message):
    path = _write(tmp_path / name, text)
    status, _, err = _run(capsys, ["check", path] + extra)
    assert status == 2
    assert err.startswith("error: ")
    assert message in err


def test_the_users_own_frames_are_shown_not_stepforges(tmp_path, capsys):
    path = _write(tmp_path / "helper.py", PROGRAMS[12][1])
    _, _, err = _run(capsys, ["check", path])
    assert f"{path}, line 5, in program\n    return helper(2)" in err
    assert f"{path}, line 2, in helper\n    return [][n]" in err
    assert "stepforge" not in err.replace(path, "").replace("stepforge/", "")


def test_a_shape_error_names_the_line_that_built_the_operator(tmp_path, capsys):
    path = _write(tmp_path / "shape.py", PROGRAMS[13][1])
    _, _, err = _run(capsys, ["check", path])
    assert err.startswith("error: StepShapeError: Flatten_0")
    assert f"{path}, line 5, in program\n    Flatten(x, 0, 5)" in err


@pytest.mark.parametrize("where", ["missing.py", "."])
def test_missing_or_directory_program(tmp_path, capsys, where):
    status, _, err = _run(capsys, ["check", str(tmp_path / where)])
    assert status == 2
    assert "no such program file" in err or "not a program file" in err


PARAMS = [
    (["-p", "M=7"], "program() takes no parameter M; it takes K=256, N=256, t=4, x_reuse='onchip'"),
    (["-p", "M=7", "-p", "Q=1"], "takes no parameters M, Q"),
    (["-p", "K"], "-p K: a parameter is given as KEY=VALUE"),
    (["-p", "=5"], "'' is not a parameter name"),
    (["-p", "1x=3"], "'1x' is not a parameter name"),
    (["-p", "class=3"], "'class' is not a parameter name"),
    (["-p", "K=abc"], "parameter K must be an int (its default is 256), not 'abc'"),
    (["-p", "K=1.5"], "parameter K must be an int (its default is 256), not '1.5'"),
    (["-p", "x_reuse=bogus"], "program() raised ValueError: x_reuse must be 'onchip' or 'offchip'"),
    (["-p", "K=0"], "shape must be two positive ints"),
    (["-p", "K=7"], "does not divide tensor X"),
    (["-p", "t=0"], "program() raised ZeroDivisionError"),
]


@pytest.mark.parametrize("argv,message", PARAMS, ids=[" ".join(a) for a, _ in PARAMS])
def test_malformed_parameters(capsys, argv, message):
    status, _, err = _run(capsys, ["check", GEMV] + argv)
    assert status == 2
    assert message in err


@pytest.mark.parametrize("argv,message", [
    (["-p", "scale=fast"], "parameter scale must be a number (its default is 1.0), not 'fast'"),
    (["-p", "fast=maybe"], "parameter fast must be true or false (its default is False), not 'maybe'"),
])
def test_parameters_take_the_type_of_their_default(tmp_path, capsys, argv, message):
    path = _write(tmp_path / "good.py", GOOD)
    status, _, err = _run(capsys, ["check", path] + argv)
    assert status == 2 and message in err
    assert main(["check", path, "-p", "scale=0.5", "-p", "fast=true", "-p", "name=y"]) == 0


def test_parameters_of_a_program_object(tmp_path, capsys):
    path = _write(tmp_path / "obj.py", GOOD + "program = program()\n")
    status, _, err = _run(capsys, ["check", path, "-p", "K=4"])
    assert status == 2 and "program is a Program, it takes no parameters, got K" in err


TRACES = [
    ("missing", None, "cannot read the trace (No such file or directory)"),
    ("not json", "{nope", "not a JSON trace"),
    ("a list", "[1, 2]", "a trace is a JSON object, not list"),
    ("binary", b"\xff\xfe\x00", "not a JSON trace"),
    ("params list", '{"params": [1]}', "the trace's 'params' must be an object, not list"),
    ("inputs list", '{"inputs": 3}', "the trace's 'inputs' must be an object, not int"),
    ("name number", '{"name": 3}', "the trace's 'name' must be a string, not int"),
    ("unknown param", '{"params": {"M": 3}}', "program() takes no parameter M"),
    ("bad param", '{"params": {"t": "big"}}', "parameter t must be an int (its default is 4), not 'big'"),
    ("own keys", '{"routing": []}', "data() takes no trace, but the trace has routing"),
]


@pytest.mark.parametrize("what,text,message", TRACES, ids=[c[0] for c in TRACES])
def test_malformed_traces(tmp_path, capsys, what, text, message):
    trace = tmp_path / "t.json"
    if text is not None:
        _write(trace, text)
    status, _, err = _run(capsys, ["run", GEMV, "--level", "ref", "--trace", str(trace),
                                   "-p", "K=16", "-p", "N=8"])
    assert status == 2 and message in err


INPUT_TRACES = [
    ({"w": []}, "w is not a host input of inputs (its inputs: s, x)"),
    ({"x": 3}, "input 'x' [2, R] of Tile(int16, 1, 2): expected a list 2 levels deep for the whole stream, got int"),
    ({"x": [[]]}, "dimension 0 is 2, but the whole stream has 1 entries"),
    ({"x": [[], [[[1, 2]]] * 4]}, "dimension 1 (R) is at most 3, but [1] has 4 entries"),
    ({"x": [[], [[[1, 2, 3]]]]}, "element [1][0]: x: a Tile(int16, 1, 2) element needs 2 cols"),
    ({"x": [[], [5]]}, "element [1][0]"),
    ({"s": [[1, 9]]}, "input 's' [1, 2] of Select(2): element [0][1]: s: 9 is not a mask of 2 bits"),
    ({"s": [[1]]}, "dimension 1 is 2, but [0] has 1 entries"),
]


@pytest.mark.parametrize("inputs,message", INPUT_TRACES, ids=[m[:30] for _, m in INPUT_TRACES])
def test_trace_inputs_that_do_not_fit_the_program(tmp_path, capsys, inputs, message):
    path = _write(tmp_path / "inputs.py", INPUTS)
    trace = _write(tmp_path / "t.json", json.dumps({"inputs": inputs}))
    status, _, err = _run(capsys, ["run", path, "--level", "ref", "--trace", trace])
    assert status == 2 and message in err


def test_moe_routing_of_the_wrong_length(tmp_path, capsys):
    trace = _write(tmp_path / "t.json", json.dumps({"params": {"T": 4}, "routing": [[0]]}))
    status, _, err = _run(capsys, ["run", MOE, "--level", "ref", "--trace", trace])
    assert status == 2 and "routing must list the experts of each of the 4 tokens, got 1" in err


DATA = [
    ("def data(program, seed=0):\n    raise KeyError('X')\n", "data() raised KeyError: 'X'"),
    ("def data(program, seed=0):\n    return 3\n", "data() returned int, not a dict"),
    ("", "defines no data() function, nothing to run"),
    ("import numpy as np\ndef data(program, seed=0):\n    return {'tensors': {'X': np.zeros((1, 8), np.int16)}}\n"
     "def reference(program, tensors, inputs):\n    return tensors['nope']\n",
     "reference() raised KeyError: 'nope'"),
]


@pytest.mark.parametrize("text,message", DATA, ids=["data raises", "data not a dict", "no data",
                                                    "reference raises"])
def test_data_and_reference_functions(tmp_path, capsys, text, message):
    path = _write(tmp_path / "d.py", GOOD + text)
    status, _, err = _run(capsys, ["run", path, "--level", "ref"])
    assert status == 2 and message in err


def test_output_folder_that_is_a_file(tmp_path, capsys):
    target = _write(tmp_path / "out", "a file")
    status, _, err = _run(capsys, ["compile", GEMV, "-p", "K=16", "-p", "N=8", "-o", target])
    assert status == 2
    assert f"error: {target}: File exists: an output folder cannot be made there" in err


def test_output_file_that_is_a_folder(tmp_path, capsys):
    status, _, err = _run(capsys, ["graph", GEMV, "-o", str(tmp_path)])
    assert status == 2 and "an output file cannot be written there" in err


def test_output_file_in_a_missing_folder(tmp_path, capsys):
    target = tmp_path / "no" / "such" / "g.dot"
    status, _, err = _run(capsys, ["graph", GEMV, "-o", str(target)])
    assert status == 2 and f"error: {target}: No such file or directory" in err


@pytest.mark.parametrize("argv,message", [
    (["compile", MOE, "-p", "T=4000", "-o", "unused"], "carries beats of 2,048,015 bits"),
    (["compile", GEMV, "-p", "K=65536", "-p", "N=65536", "-o", "unused"],
     "the program's memory needs 4,295,557,248 bytes"),
    (["compile", str(ROOT / "examples" / "matmul.py"), "-p", "M=2048", "-p", "K=2048", "-p",
      "N=2048", "--config", "ice40", "-o", "unused"],
     "the memory of the ice40 machine is built for at most 4,194,304 bytes"),
], ids=["beats", "memory", "board memory"])
def test_designs_too_large_are_refused_up_front_with_their_size(tmp_path, capsys, monkeypatch,
                                                                argv, message):
    monkeypatch.chdir(tmp_path)
    status, _, err = _run(capsys, argv)
    assert status == 2 and message in err
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("argv,message", [
    (["fuzz", "--count", "0"], "--count must be at least 1, not 0"),
    (["fuzz", "--data-seeds", "0"], "--data-seeds must be at least 1, not 0"),
    (["fuzz", "--shrink", "-1"], "--shrink must be 0 or more, not -1"),
])
def test_fuzz_options(capsys, argv, message):
    status, _, err = _run(capsys, argv)
    assert status == 2 and message in err


@pytest.mark.parametrize("argv,status,message", [
    (["build", GEMV, "--device", "up5k", "--memory", "sdram"], 1,
     "error: memory 'sdram' is the ULX3S's chip beside an ecp5-85f, not a memory of the up5k"),
    (["build", GEMV, "--board", "icebreaker", "--memory", "sdram"], 2,
     "error: --memory applies to --device builds"),
])
def test_sdram_memory_option(capsys, argv, status, message):
    code, _, err = _run(capsys, argv)
    assert code == status and message in err


@pytest.mark.parametrize("argv", [[], ["nosuchcommand"], ["run"], ["run", GEMV, "--seed", "abc"],
                                  ["run", GEMV, "--level", "bogus"], ["check", GEMV, "--bogus"],
                                  ["build", GEMV], ["fuzz", "--count", "many"]])
def test_command_line_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and "usage: stepforge" in err and "Traceback" not in out + err


def test_ctrl_c_exits_130_without_a_traceback(capsys, monkeypatch):
    def interrupted(args):
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_check", interrupted)
    status, _, err = _run(capsys, ["check", GEMV])
    assert status == 130 and err.strip() == "interrupted"


def test_a_bug_in_stepforge_still_shows_its_traceback(monkeypatch):
    def broken(args):
        raise AssertionError("an internal invariant")
    monkeypatch.setattr(cli, "cmd_check", broken)
    with pytest.raises(AssertionError, match="an internal invariant"):
        main(["check", GEMV])


def test_program_errors_are_system_exits_outside_the_command_line(tmp_path):
    with pytest.raises(ProgramError) as e:
        load(tmp_path / "missing.py")
    assert isinstance(e.value, SystemExit) and "no such program file" in str(e.value)


def test_exit_codes_are_documented():
    assert sorted(EXIT_CODES) == [0, 1, 2, 130]
    assert "exit status" in cli.EPILOG and all(str(k) in cli.EPILOG for k in EXIT_CODES)


@pytest.mark.parametrize("argv", [
    ["run", GEMV, "--tile", "4y4"], ["run", GEMV, "--tile", "0x4"], ["compile", GEMV, "-o", "x",
                                                                     "--tile", "4"],
    ["build", GEMV, "--device", "up5k", "--tile", "x4"]])
def test_malformed_tile(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --tile: must be ROWSxCOLS with both >= 1 (4x4)" in err
    assert "Traceback" not in err


def test_the_performance_model_refuses_a_cyclic_program_in_words(capsys):
    attn = str(ROOT / "examples" / "decode_attention.py")
    status, out, err = _run(capsys, ["run", attn, "--level", "perf"])
    assert status == 2 and out == ""
    assert err == ("error: ModelError: the performance model does not model cycles: "
                   "decode_attention closes one with the feedback dispatch (run it in Verilator, "
                   "--level rtl, or in the interpreter, --level ref)\n")


def test_an_fpga_build_refuses_wide_beats_before_synthesis(tmp_path, capsys):
    status, _, err = _run(capsys, ["build", MOE, "-p", "T=4", "--device", "up5k",
                                   "-o", str(tmp_path / "moe")])
    assert status == 2
    assert "as single wide beats" in err and "stepforge build --wide-beats" in err
    assert not (tmp_path / "moe" / "top.v").exists()
