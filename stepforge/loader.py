"""Loading a STeP program file.

A program file is a Python module that defines

``program(**params) -> Program``
    builds the program (keyword parameters with defaults choose its sizes);
``data(program, seed=0[, trace=None]) -> dict`` (optional)
    host data: ``{"tensors": {name: array}, "inputs": {name: nested list}}``; with a ``trace``
    parameter it also reads a trace (:func:`load_trace`), e.g. a routing decision per token;
``reference(program, tensors, inputs) -> dict`` (optional)
    the expected results computed with plain NumPy: ``{tensor or output name: value}``.
"""

import importlib.util
import inspect
import sys
from pathlib import Path

from .compiler.graph import Program
import json

__all__ = ["ProgramFile", "load", "load_trace"]

#: keys every trace may have; any other key is for the program file's ``data(trace=...)``
TRACE_KEYS = ("name", "description", "source", "params", "inputs")


class ProgramFile:
    """A loaded program file."""

    def __init__(self, path, module):
        self.path = Path(path)
        self.module = module

    @property
    def name(self):
        return self.path.stem

    def build(self, **params):
        fn = getattr(self.module, "program", None)
        if isinstance(fn, Program):
            return fn
        if not callable(fn):
            raise SystemExit(f"{self.path}: defines no program() function")
        p = fn(**params)
        if not isinstance(p, Program):
            raise SystemExit(f"{self.path}: program() returned {type(p).__name__}, not a Program")
        return p

    @property
    def has_data(self):
        return callable(getattr(self.module, "data", None))

    def data(self, program, seed=0, trace=None):
        """Host data for ``program``; a ``trace``'s ``inputs`` replace the generated ones."""
        fn = self.module.data
        if trace is None:
            return fn(program, seed=seed)
        own = sorted(k for k in trace if k not in TRACE_KEYS)
        if "trace" in inspect.signature(fn).parameters:
            data = fn(program, seed=seed, trace=trace)
        elif own:
            raise SystemExit(f"{self.path}: data() takes no trace, but the trace has "
                             f"{', '.join(own)} besides {', '.join(TRACE_KEYS)}")
        else:
            data = fn(program, seed=seed)
        if trace.get("inputs"):
            data = {**data, "inputs": {**data.get("inputs", {}), **trace["inputs"]}}
        return data

    def reference(self, program, tensors, inputs):
        fn = getattr(self.module, "reference", None)
        return None if fn is None else fn(program, tensors, inputs)

    def params(self):
        fn = getattr(self.module, "program", None)
        if not callable(fn):
            return {}
        return {k: v.default for k, v in inspect.signature(fn).parameters.items()
                if v.default is not inspect.Parameter.empty}


def load(path):
    """Import the program file at ``path``."""
    path = Path(path)
    if not path.is_file():
        raise SystemExit(f"{path}: no such program file")
    name = f"stepforge_program_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return ProgramFile(path, module)


def load_trace(path):
    """Read a trace: a JSON object recorded from a workload (or made to stand for one).

    Keys: ``name``, ``description``, ``source`` (where it comes from), ``params`` (keyword
    parameters of ``program()``; ``-p`` on the command line overrides them), ``inputs`` (host
    streams by name, replacing the generated ones), and keys of the program file's own (e.g.
    ``routing`` for ``examples/moe.py``), which its ``data(trace=...)`` reads.
    """
    path = Path(path)
    try:
        trace = json.loads(path.read_text())
    except OSError as e:
        raise SystemExit(f"{path}: cannot read the trace ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise SystemExit(f"{path}: not a JSON trace ({e})") from None
    if not isinstance(trace, dict):
        raise SystemExit(f"{path}: a trace is a JSON object, not {type(trace).__name__}")
    for key in ("params", "inputs"):
        if not isinstance(trace.get(key, {}), dict):
            raise SystemExit(f"{path}: the trace's {key!r} must be an object")
    return trace
