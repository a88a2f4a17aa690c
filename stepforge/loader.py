"""Loading a STeP program file.

A program file is a Python module that defines

``program(**params) -> Program``
    builds the program (keyword parameters with defaults choose its sizes);
``data(program, seed=0) -> dict`` (optional)
    host data: ``{"tensors": {name: array}, "inputs": {name: nested list}}``;
``reference(program, tensors, inputs) -> dict`` (optional)
    the expected results computed with plain NumPy: ``{tensor or output name: value}``.
"""

import importlib.util
import inspect
import sys
from pathlib import Path

from .compiler.graph import Program

__all__ = ["ProgramFile", "load"]


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

    def data(self, program, seed=0):
        return self.module.data(program, seed=seed)

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
