"""Loading a STeP program file, its parameters and a trace, with errors in words.

A program file is a Python module that defines

``program(**params) -> Program``
    builds the program (keyword parameters with defaults choose its sizes);
``data(program, seed=0[, trace=None]) -> dict`` (optional)
    host data: ``{"tensors": {name: array}, "inputs": {name: nested list}}``; with a ``trace``
    parameter it also reads a trace (:func:`load_trace`), e.g. a routing decision per token;
``reference(program, tensors, inputs) -> dict`` (optional)
    the expected results computed with plain NumPy: ``{tensor or output name: value}``.

Everything a user can get wrong here is a :class:`ProgramError` whose message says what and
where, never a traceback from inside stepforge: a file that does not exist, does not parse or
raises while it is imported; a missing ``program()``; an unknown or malformed parameter (the
message lists the parameters ``program()`` takes); ``program()``, ``data()`` or
``reference()`` raising (the message shows the user's own frames, not stepforge's); a trace that
is not JSON, has keys of the wrong type, or host inputs that do not fit the program's streams.
"""

import importlib.util
import inspect
import json
import keyword
import sys
import traceback
from pathlib import Path

from .compiler.dims import fmt_shape
from .compiler.errors import StepError
from .compiler.graph import Program
from .contract.values import to_value

__all__ = ["ProgramFile", "ProgramError", "load", "load_trace", "parse_params", "check_inputs",
           "exit_status", "EXIT_CODES"]

#: The exit status of ``stepforge``: what each means.
EXIT_CODES = {
    0: "success (run/fuzz: every check passed)",
    1: "a check failed: a mismatch, an error flag, a deadlock, a failed FPGA build, a fuzz failure",
    2: "the input is wrong: the command line, a program file, a parameter, a trace, a STeP "
       "shape or type error, an output path that cannot be written, a design the hardware "
       "cannot hold",
    130: "interrupted (Ctrl-C)",
}

#: keys every trace may have; any other key is for the program file's ``data(trace=...)``
TRACE_KEYS = ("name", "description", "source", "params", "inputs")


class ProgramError(SystemExit):
    """A program file, a parameter or a trace is wrong; the message says what and where.

    A ``SystemExit`` whose code is the message, as every user error of the front door: the
    command line prints it as ``error: <message>`` and exits with status 2 (uncaught elsewhere,
    Python prints the message and exits with status 1, without a traceback either).
    """


def user_frames(exc, path):
    """The frames of ``exc``'s traceback that lie in the file ``path``, formatted."""
    path = Path(path).resolve()
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        try:
            here = Path(frame.filename).resolve() == path
        except (OSError, ValueError):
            here = False
        if here:
            lines.append(f"  {frame.filename}, line {frame.lineno}, in {frame.name}")
            if frame.line:
                lines.append(f"    {frame.line.strip()}")
    return lines


def _raised(path, what, exc):
    """A :class:`ProgramError` for ``exc``, raised by the user's ``what``."""
    frames = user_frames(exc, path)
    name = type(exc).__name__
    # a STeP error keeps its own words first (the operator, the port, the shapes); the frames
    # say which line of the program built the operator
    head = f"{name}: {exc}" if isinstance(exc, StepError) else f"{path}: {what} raised {name}: {exc}"
    return ProgramError("\n".join([head] + frames))


def _kind(value):
    return {bool: "a bool", int: "an int", float: "a number"}.get(type(value), "a string")


def _convert(name, value, default, where):
    """``value`` (from the command line or a trace) as the type of ``default``."""
    if default is None or default is inspect.Parameter.empty or not isinstance(value, str):
        if isinstance(default, bool) and not isinstance(value, bool):
            raise ProgramError(f"{where}: parameter {name} must be a bool (its default is "
                               f"{default!r}), not {value!r}")
        if (isinstance(default, (int, float)) and not isinstance(default, bool)
                and (not isinstance(value, (int, float)) or isinstance(value, bool))):
            raise ProgramError(f"{where}: parameter {name} must be {_kind(default)} (its default "
                               f"is {default!r}), not {value!r}")
        return value
    if isinstance(default, bool):
        low = value.lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ProgramError(f"{where}: parameter {name} must be true or false (its default is "
                           f"{default!r}), not {value!r}")
    if isinstance(default, int):
        try:
            return int(value)
        except ValueError:
            raise ProgramError(f"{where}: parameter {name} must be an int (its default is "
                               f"{default!r}), not {value!r}") from None
    if isinstance(default, float):
        try:
            return float(value)
        except ValueError:
            raise ProgramError(f"{where}: parameter {name} must be a number (its default is "
                               f"{default!r}), not {value!r}") from None
    return value


def parse_params(items):
    """``["K=8", "tiling=static"]`` (``-p`` options) as ``{"K": 8, "tiling": "static"}``.

    A value that reads as an int is an int, else a string; :meth:`ProgramFile.build` converts
    it to the type of the parameter's default.

    Raises
    ------
    ProgramError
        An item that is not ``KEY=VALUE`` with ``KEY`` a Python identifier.
    """
    params = {}
    for item in items:
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq:
            raise ProgramError(f"-p {item}: a parameter is given as KEY=VALUE (e.g. -p K=64)")
        if not key.isidentifier() or keyword.iskeyword(key):
            raise ProgramError(f"-p {item}: {key!r} is not a parameter name (KEY=VALUE, KEY a "
                               f"Python identifier)")
        try:
            params[key] = int(value)
        except ValueError:
            params[key] = value
    return params


class ProgramFile:
    """A loaded program file."""

    def __init__(self, path, module):
        self.path = Path(path)
        self.module = module

    @property
    def name(self):
        return self.path.stem

    def _program_fn(self):
        fn = getattr(self.module, "program", None)
        if isinstance(fn, Program):
            return fn
        if not callable(fn):
            what = "defines no program() function" if fn is None else \
                f"defines program as {type(fn).__name__}, not a function"
            raise ProgramError(f"{self.path}: {what} (a program file defines program(**params) "
                               f"returning a stepforge Program)")
        return fn

    def signature(self):
        """``program()``'s parameters as ``K=256, N=256, t=4`` (for messages)."""
        fn = self._program_fn()
        if isinstance(fn, Program):
            return "no parameters"
        parts = []
        for k, v in inspect.signature(fn).parameters.items():
            if v.kind == v.VAR_KEYWORD:
                parts.append(f"**{k}")
            elif v.kind != v.VAR_POSITIONAL:
                parts.append(k if v.default is inspect.Parameter.empty else f"{k}={v.default!r}")
        return ", ".join(parts) or "no parameters"

    def check_params(self, params, where=None):
        """``params`` converted to the types of ``program()``'s defaults; unknown names refused."""
        fn = self._program_fn()
        where = where or str(self.path)
        if isinstance(fn, Program):
            if params:
                raise ProgramError(f"{where}: program is a Program, it takes no parameters, got "
                                   f"{', '.join(sorted(params))}")
            return {}
        sig = inspect.signature(fn).parameters
        takes_any = any(v.kind == v.VAR_KEYWORD for v in sig.values())
        named = {k: v for k, v in sig.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)}
        unknown = sorted(k for k in params if k not in named)
        if unknown and not takes_any:
            s = "s" if len(unknown) > 1 else ""
            raise ProgramError(f"{where}: program() takes no parameter{s} "
                               f"{', '.join(unknown)}; it takes {self.signature()}")
        missing = [k for k, v in named.items() if v.default is inspect.Parameter.empty
                   and k not in params]
        if missing:
            raise ProgramError(f"{where}: program() needs {', '.join(missing)} (-p "
                               f"{missing[0]}=...); it takes {self.signature()}")
        return {k: _convert(k, v, named[k].default if k in named else None, where)
                for k, v in params.items()}

    def build(self, **params):
        fn = self._program_fn()
        params = self.check_params(params)
        if isinstance(fn, Program):
            return fn
        try:
            p = fn(**params)
        except Exception as e:  # noqa: BLE001 (whatever the user's code raises is reported)
            raise _raised(self.path, "program()", e) from None
        if not isinstance(p, Program):
            raise ProgramError(f"{self.path}: program() returned {type(p).__name__}, not a Program")
        return p

    @property
    def has_data(self):
        return callable(getattr(self.module, "data", None))

    def data(self, program, seed=0, trace=None):
        """Host data for ``program``; a ``trace``'s ``inputs`` replace the generated ones."""
        fn = self.module.data
        try:
            if trace is None:
                data = fn(program, seed=seed)
                trace = {}
            else:
                data = self._traced_data(fn, program, seed, trace)
        except SystemExit:       # a ProgramError, or the user's own exit message
            raise
        except Exception as e:  # noqa: BLE001 (whatever the user's code raises is reported)
            raise _raised(self.path, "data()", e) from None
        if not isinstance(data, dict):
            raise ProgramError(f"{self.path}: data() returned {type(data).__name__}, not a dict "
                               f"with 'tensors' and 'inputs'")
        if trace.get("inputs"):
            check_inputs(program, trace["inputs"], "the trace's inputs")
            data = {**data, "inputs": {**data.get("inputs", {}), **trace["inputs"]}}
        return data

    def _traced_data(self, fn, program, seed, trace):
        own = sorted(k for k in trace if k not in TRACE_KEYS)
        if "trace" in inspect.signature(fn).parameters:
            return fn(program, seed=seed, trace=trace)
        if own:
            raise ProgramError(f"{self.path}: data() takes no trace, but the trace has "
                               f"{', '.join(own)} besides {', '.join(TRACE_KEYS)}")
        return fn(program, seed=seed)

    def reference(self, program, tensors, inputs):
        fn = getattr(self.module, "reference", None)
        if fn is None:
            return None
        try:
            return fn(program, tensors, inputs)
        except Exception as e:  # noqa: BLE001 (whatever the user's code raises is reported)
            raise _raised(self.path, "reference()", e) from None

    def params(self):
        fn = getattr(self.module, "program", None)
        if not callable(fn):
            return {}
        return {k: v.default for k, v in inspect.signature(fn).parameters.items()
                if v.default is not inspect.Parameter.empty}


def load(path):
    """Import the program file at ``path``.

    Raises
    ------
    ProgramError
        The file is missing, is not Python, does not parse, or raises while it is imported.
    """
    path = Path(path)
    if not path.exists():
        raise ProgramError(f"{path}: no such program file")
    if not path.is_file():
        raise ProgramError(f"{path}: not a program file (a directory?)")
    name = f"stepforge_program_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProgramError(f"{path}: not a Python file (a program file is a .py module)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        del sys.modules[name]
        where = f"{e.filename or path}, line {e.lineno}"
        text = (e.text or "").rstrip("\n")
        caret = " " * max(0, (e.offset or 1) - 1 - (len(text) - len(text.lstrip()))) + "^"
        lines = [f"{path}: does not parse: {e.msg} ({where})"]
        if text.strip():
            lines += [f"    {text.strip()}", f"    {caret}"]
        raise ProgramError("\n".join(lines)) from None
    except Exception as e:  # noqa: BLE001 (whatever the user's module raises is reported)
        del sys.modules[name]
        raise _raised(path, "importing it", e) from None
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
        raise ProgramError(f"{path}: cannot read the trace ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ProgramError(f"{path}: not a JSON trace ({e})") from None
    if not isinstance(trace, dict):
        raise ProgramError(f"{path}: a trace is a JSON object, not {type(trace).__name__}")
    for key in ("params", "inputs"):
        if not isinstance(trace.get(key, {}), dict):
            raise ProgramError(f"{path}: the trace's {key!r} must be an object, not "
                               f"{type(trace[key]).__name__}")
    for key in ("name", "description", "source"):
        if key in trace and not isinstance(trace[key], str):
            raise ProgramError(f"{path}: the trace's {key!r} must be a string, not "
                               f"{type(trace[key]).__name__}")
    return trace


def check_inputs(program, inputs, where="inputs"):
    """Check host input streams (nested lists by input name) against ``program``'s inputs.

    Every name must be an input of the program; every value a nested list ``rank + 1`` levels
    deep whose static dimensions have their sizes, whose symbolic ones stay within their bounds,
    and whose elements fit the element type.

    Raises
    ------
    ProgramError
    """
    streams = {n.name: n.outputs[0] for n in program.inputs}
    unknown = sorted(k for k in inputs if k not in streams)
    if unknown:
        have = ", ".join(sorted(streams)) or "none"
        raise ProgramError(f"{where}: {', '.join(unknown)} is not a host input of "
                           f"{program.name} (its inputs: {have})")
    for name, value in inputs.items():
        s = streams[name]
        _check_level(value, s, 0, [], f"{where}: input {name!r} {fmt_shape(s.shape)} of "
                                      f"{s.dtype!r}")


def _check_level(value, s, k, index, what):
    at = "".join(f"[{i}]" for i in index) or "the whole stream"
    if not isinstance(value, (list, tuple)):
        raise ProgramError(f"{what}: expected a list {len(s.shape) - k} levels deep for {at}, "
                           f"got {type(value).__name__}")
    d = s.shape[k]
    symbols = s.program.symbols
    if isinstance(d, int):
        if len(value) != d:
            raise ProgramError(f"{what}: dimension {k} is {d}, but {at} has "
                               f"{len(value)} entries")
    else:
        bound = symbols.bound(d)
        if bound is not None and len(value) > bound:
            raise ProgramError(f"{what}: dimension {k} ({d}) is at most {bound}, but "
                               f"{at} has {len(value)} entries")
    for i, v in enumerate(value):
        if k == len(s.shape) - 1:
            try:
                to_value(v, s.dtype, s.node.name)
            except (StepError, TypeError, ValueError) as e:
                raise ProgramError(f"{what}: element {''.join(f'[{j}]' for j in index)}[{i}]: "
                                   f"{e}") from None
        else:
            _check_level(v, s, k + 1, index + [i], what)


def exit_status(exc, err=None):
    """Print ``exc`` as ``error: ...`` (no traceback) and return its exit status, or return None
    when it is not one of the errors a user causes (:data:`EXIT_CODES`)."""
    err = err or sys.stderr
    if isinstance(exc, KeyboardInterrupt):
        print("\ninterrupted", file=err)
        return 130
    if isinstance(exc, StepError):
        message = f"{type(exc).__name__}: {exc}"
    elif isinstance(exc, SystemExit) and isinstance(exc.code, str):
        message = exc.code
    elif isinstance(exc, MemoryError):
        message = "out of memory: the program's sizes are too large for this machine"
    elif isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror}: an output folder cannot be made there"
    elif isinstance(exc, IsADirectoryError) and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror}: an output file cannot be written there"
    elif isinstance(exc, OSError) and exc.filename is not None:
        message = f"{exc.filename}: {exc.strerror or exc}"
    else:
        return None
    print(f"error: {message}", file=err)
    return 2
