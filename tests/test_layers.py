"""The layers import one way (``docs/architecture.md`` section 1).

Each layer is imported in a fresh interpreter with the packages it may not use blocked by a
meta-path finder that raises on them, so an import at the top of any module of the layer, direct
or through another module, fails the test with the module that made it. Imports inside functions
do not run at import time, so every import of every module is also read from its source (AST) and
checked against the same table. And an import inside a function needs a comment saying why (on its
line or the line above).
"""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Folder -> package (``pyproject.toml``, ``package-dir``).
FOLDERS = {"compiler": "stepforge.compiler", "contract": "stepforge.contract", "sim": "stepforge.sim",
           "hdl": "stepforge.hdl", "boards": "stepforge.boards", "cocotb_tests": "stepforge.cocotb_tests",
           "perf": "stepforge.perf", "stepforge": "stepforge"}

LOWERING = ["stepforge.compiler.lower", "stepforge.compiler.lower_units"]
INTERPRETER = ["stepforge.sim", "stepforge.sim.ref"]
FRONT = ["stepforge.cli", "stepforge.fpga", "stepforge.runner", "stepforge.report",
         "stepforge.loader", "stepforge.fuzz"]
HARNESS_ONLY = ["stepforge.sim.rtl", "stepforge.cocotb_tests"]
ABOVE_HARNESS = ["stepforge.boards"] + FRONT
#: The modules of boards/ that run the FPGA tools on Verilog.
FPGA_FLOW = ["build", "devices", "tools", "pins", "netlist", "nextpnr", "sta", "paths", "report"]

#: layer -> (its modules' folder/module prefixes, what it may not import).
LAYERS = {
    "language": (["stepforge.compiler"],
                 LOWERING + ["stepforge.contract", "stepforge.sim", "stepforge.hdl", "amaranth"]
                 + HARNESS_ONLY + ABOVE_HARNESS),
    "contract": (["stepforge.contract"],
                 LOWERING + ["stepforge.sim", "stepforge.hdl"] + HARNESS_ONLY + ABOVE_HARNESS),
    "interpreter": (INTERPRETER,
                    LOWERING + ["stepforge.hdl", "amaranth"] + HARNESS_ONLY + ABOVE_HARNESS),
    "hardware": (["stepforge.hdl"], LOWERING + ["stepforge.sim"] + HARNESS_ONLY + ABOVE_HARNESS),
    "lowering": (LOWERING, ["stepforge.sim"] + HARNESS_ONLY + ABOVE_HARNESS),
    "harness": (HARNESS_ONLY, ABOVE_HARNESS),
    "perf": (["stepforge.perf"], HARNESS_ONLY + ABOVE_HARNESS),   # beside the harness, no RTL
    # The FPGA flow takes Verilog and knows nothing else of stepforge; the rest of boards/ (board
    # presets, the host link, its driver) builds on the hardware, the lowering and the harness.
    "fpga flow": ([f"stepforge.boards.{m}" for m in FPGA_FLOW],
                  ["stepforge.compiler", "stepforge.contract", "stepforge.sim", "stepforge.hdl",
                   "stepforge.cocotb_tests", "stepforge.boards.host"] + FRONT),
    "boards": (["stepforge.boards"], FRONT),
}


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _modules():
    """``{module name: source path}`` of every module of the stepforge packages."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package] + parts)] = path
    return found


MODULES = _modules()


def _layer_of(module):
    """The layer of ``module``: the most specific prefix of the table (``sim/ref/`` is the
    interpreter's, ``sim/rtl/`` the harness's)."""
    best = None
    for layer, (members, _) in LAYERS.items():
        for m in members:
            if _within(module, [m]) and (best is None or len(m) > len(best[1])):
                best = (layer, m)
    return None if best is None else best[0]


def _members(layer):
    return sorted(m for m in MODULES if _layer_of(m) == layer)


def _imports(module, path):
    """``(line, absolute name, inside a function)`` of every import of ``module``'s source."""
    tree = ast.parse(path.read_text())
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []

    def visit(node, in_func):
        for child in ast.iter_child_nodes(node):
            f = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((child.lineno, a.name, f) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = ".".join(base[:len(base) - child.level + 1])
                    target = f"{base}.{child.module}" if child.module else base
                else:
                    target = child.module
                out.append((child.lineno, target, f))
                # ``from . import x`` may name a submodule
                out.extend((child.lineno, f"{target}.{a.name}", f) for a in child.names)
            visit(child, f)
    visit(tree, False)
    return out


def test_every_module_has_a_layer():
    front = {"stepforge"} | set(FRONT) | {"stepforge.__main__"}
    unplaced = [m for m in MODULES if _layer_of(m) is None and m not in front
                and not _within(m, FRONT)]
    assert unplaced == []
    for layer in LAYERS:
        assert _members(layer), layer


@pytest.mark.parametrize("layer", list(LAYERS))
def test_layer_source_imports_one_way(layer):
    _, forbidden = LAYERS[layer]
    bad = []
    for module in _members(layer):
        for line, name, _ in _imports(module, MODULES[module]):
            if _within(name, forbidden):
                bad.append(f"{MODULES[module].relative_to(ROOT)}:{line}: {name}")
    assert bad == []


_BLOCKER = r"""
import importlib, json, sys, traceback
forbidden, modules = json.loads(sys.argv[1]), json.loads(sys.argv[2])
hits, current = [], [None]

class LayerViolation(Exception):   # not an ImportError: ``except ImportError`` cannot hide it
    pass

class Block:
    def find_spec(self, name, path=None, target=None):
        if any(name == f or name.startswith(f + ".") for f in forbidden):
            frames = [f for f in traceback.extract_stack()
                      if not f.filename.startswith("<")]
            hits.append([current[0], name, f"{frames[-1].filename}:{frames[-1].lineno}"])
            raise LayerViolation(name)
        return None

sys.meta_path.insert(0, Block())
for m in modules:
    current[0] = m
    try:
        importlib.import_module(m)
    except LayerViolation:
        pass
print(json.dumps(hits))
"""


def _import_blocked(modules, forbidden):
    run = subprocess.run([sys.executable, "-c", _BLOCKER, json.dumps(forbidden), json.dumps(modules)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("layer", [layer for layer in LAYERS if layer != "harness"] + ["harness"])
def test_layer_imports_with_the_layers_above_blocked(layer):
    _, forbidden = LAYERS[layer]
    # cocotb test benches import cocotb, which only works inside a simulator: source check only
    modules = [m for m in _members(layer) if not _within(m, ["stepforge.cocotb_tests"])]
    assert _import_blocked(modules, forbidden) == []


def test_blocker_reports_the_import_and_its_importer():
    hits = _import_blocked(["stepforge.compiler.lower"], ["stepforge.hdl"])
    assert len(hits) == 1
    module, name, where = hits[0]
    assert module == "stepforge.compiler.lower" and name == "stepforge.hdl"
    assert where.endswith(str(Path("compiler", "lower.py")) + f":{where.rsplit(':', 1)[1]}")


def _uncommented_function_imports(module, path):
    lines = path.read_text().split("\n")
    bad = []
    for line, name, in_func in _imports(module, path):
        text, above = lines[line - 1], lines[line - 2].strip() if line > 1 else ""
        if in_func and "#" not in text and not above.startswith("#"):
            bad.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}: "
                       f"{text.strip()}")
    return sorted(set(bad))


def test_no_function_level_import_without_a_reason():
    bad = []
    for module, path in MODULES.items():
        bad += _uncommented_function_imports(module, path)
    assert bad == []


def test_function_level_import_check_flags_a_bare_import(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import json\n\n\ndef g():\n    import os  # why\n\n\n"
                   "def h():\n    # why, above\n    import re\n")
    assert _uncommented_function_imports("pkg.m", src) == [f"{src}:2: import json"]
