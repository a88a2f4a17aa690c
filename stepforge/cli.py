"""The ``stepforge`` command line (``stepforge sweep PROGRAM.py -p t=4,8,16``: a parameter grid).

``stepforge check PROGRAM.py``   shapes of every edge, symbols and symbolic metrics
``stepforge graph PROGRAM.py``   a DOT picture of the program
``stepforge run PROGRAM.py``     run on the example's data, check against plain NumPy, report
``stepforge build PROGRAM.py --device ecp5-85f|up5k``   synthesize, place and route, FPGA report
``stepforge build PROGRAM.py --board B``   a board's bitstream and report (docs/boards.md)
``stepforge flash --board B DIR_OR_BITSTREAM``   load a bitstream with openFPGALoader
``stepforge fuzz --count N --seed S [--stall]``   random programs, interpreter vs Verilator
"""

import argparse
import functools
import json
import sys
from pathlib import Path

from .boards import DEVICES, BuildError
from .compiler.dot import to_dot
from .compiler.metrics import bind, metrics
from .fuzz.command import add_arguments as fuzz_arguments, run_command as cmd_fuzz
from .hdl.config import MEMORIES, HardwareConfig
from .loader import EXIT_CODES, exit_status, load, load_trace, parse_params
from .report import check_report, metrics_report, table
from .sim.ref.interpreter import run


def _trace(args):
    """The trace of ``--trace`` (read once, in :func:`main`), or None."""
    return getattr(args, "trace_data", None)


def _params(args):
    trace = _trace(args)
    params = dict(trace.get("params", {})) if trace else {}
    params.update(parse_params(args.param or []))
    return params


def cmd_check(args):
    pf = load(args.program)
    program = pf.build(**_params(args))
    print(check_report(program))
    trace = _trace(args)
    if trace is not None:
        data = pf.data(program, trace=trace)
        result = run(program, tensors=data.get("tensors", {}), inputs=data.get("inputs", {}))
        print(f"\nwith trace {args.trace} ({trace.get('name', 'unnamed')}):")
        print(metrics_report(metrics(program).subs(bind(program, result.trace))))
    return 0


def cmd_graph(args):
    pf = load(args.program)
    text = to_dot(pf.build(**_params(args)))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
        print(f"wrote {args.output}")
    return 0


def cmd_run(args):
    pf = load(args.program)
    if args.board:
        if not args.port:
            print("error: --board needs --port: the board's serial device (e.g. /dev/ttyUSB1), "
                  "or sim for its design in Verilator", file=sys.stderr)
            return 2
        from .runner import run_board  # deferred: Amaranth and the host link
        ok = run_board(pf, board=args.board, port=args.port, params=_params(args),
                       seed=args.seed, trace=_trace(args), timeout=args.timeout, tile=args.tile)
    elif args.level == "ref":
        from .runner import run_reference  # deferred: Amaranth, 0.5 s
        ok = run_reference(pf, params=_params(args), seed=args.seed, trace=_trace(args))
    elif args.level == "perf":
        from .perf.report import run_perf  # deferred: Amaranth and SciPy
        ok = run_perf(pf, params=_params(args), seed=args.seed, trace=_trace(args),
                      config=_config(args), fifo_sizing=args.fifo_sizing)
    else:
        from .runner import run_hardware  # deferred: Amaranth, 0.5 s
        ok = run_hardware(pf, params=_params(args), seed=args.seed, trace=_trace(args),
                          stall=args.stall, watchdog=args.watchdog, waves=args.waves,
                          config=_config(args))
    return 0 if ok else 1


def cmd_sweep(args):
    from .perf.sweep import parse_grid, sweep, write_results  # deferred: Dask, SciPy
    from .sim.rtl import run_rtl  # deferred: Amaranth; the workers run it for --level rtl
    points = parse_grid(args.param, dict(_trace(args).get("params", {})) if _trace(args) else {})
    fpga, config = None, _config(args)
    if args.level == "fpga":
        from .fpga import device_config, fpga_point  # deferred: Amaranth
        config = device_config(args.device, args.tile)
        fpga = functools.partial(fpga_point, device=args.device, seeds=args.seeds, tile=args.tile,
                                 out_dir=Path(f"{args.output}-builds").resolve())
    rows = sweep(args.program, points, level=args.level, load=load, rtl=run_rtl, fpga=fpga,
                 workers=args.workers, scheduler=args.scheduler, seed=args.seed,
                 trace=_trace(args), config=config, fifo_sizing=args.fifo_sizing)
    print(table([[r.get(k) for k in rows[0]] for r in rows], list(rows[0])))
    print("wrote " + ", ".join(map(str, write_results(rows, args.output))))
    return 0 if all(r.get("status") == "done" for r in rows) else 1


#: ``--config`` names of the machine presets.
CONFIGS = {"sim": HardwareConfig.sim, "ice40": HardwareConfig.ice40_up5k,
           "ecp5": HardwareConfig.ecp5_85f, "ecp5-sdram": HardwareConfig.ulx3s_sdram}


def _config(args):
    config = CONFIGS[args.config]()
    return config.with_tile(getattr(args, "tile", None))


def tile_arg(text):
    """``--tile``'s type: ``"4x4"`` -> ``(4, 4)``."""
    rows, sep, cols = str(text).lower().partition("x")
    if not (sep and rows.isdigit() and cols.isdigit() and int(rows) >= 1 and int(cols) >= 1):
        raise argparse.ArgumentTypeError(f"must be ROWSxCOLS with both >= 1 (4x4), not {text!r}")
    return int(rows), int(cols)


def cmd_compile(args):
    from .sim.rtl import compile_program  # deferred: Amaranth, 0.5 s
    pf = load(args.program)
    program = pf.build(**_params(args))
    hw, system, text = compile_program(program, _config(args))
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "top.v").write_text(text)
    manifest = hw.manifest()
    manifest["csrs"] = system.csr_map
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (out / "graph.dot").write_text(to_dot(hw.program))      # what the hardware runs
    report = check_report(program)
    if hw.program is not program:
        report += "\n\nafter hierarchical tiling (what the hardware runs):\n" + check_report(hw.program)
    (out / "report.txt").write_text(report + "\n")
    print(f"wrote {out}/top.v ({len(text.splitlines())} lines), manifest.json, graph.dot, report.txt")
    return 0


def cmd_build(args):
    if args.board is not None:
        if args.synth_flags or args.memory != "bram":
            print(f"error: {'--synth-flags' if args.synth_flags else '--memory'} applies to "
                  f"--device builds", file=sys.stderr)
            return 2
        from .boards.board_build import main_build  # deferred: Amaranth and amaranth-boards
        pf = load(args.program)
        return main_build(pf.build(**_params(args)), args.board, freq=args.freq,
                          out_dir=args.output or Path("build") / f"{pf.name}-{args.board}",
                          seeds=args.seeds, jobs=args.jobs, tile=args.tile,
                          wide_beats=args.wide_beats)
    from .fpga import build_program  # deferred: Amaranth, 0.5 s
    pf = load(args.program)
    out = Path(args.output or Path("build") / f"{pf.name}-{args.device}")
    try:
        report = build_program(pf.build(**_params(args)), args.device, out, seeds=args.seeds,
                               jobs=args.jobs, freq_mhz=args.freq, name=pf.name, tile=args.tile,
                               synth_flags=args.synth_flags, wide_beats=args.wide_beats,
                               memory=args.memory)
    except (BuildError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print()
    print(report.text())
    print(f"\nwrote {out}/build.json")
    return 0


def cmd_flash(args):
    from .boards.flash import main_flash  # deferred: Amaranth and amaranth-boards
    return main_flash(args.board, args.path)


#: The end of ``stepforge --help``: what the exit status means (``loader.EXIT_CODES``).
EPILOG = "exit status: " + "; ".join(f"{k} {v}" for k, v in EXIT_CODES.items())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="stepforge", description=__doc__.splitlines()[0],
                                     epilog=EPILOG)
    sub = parser.add_subparsers(dest="cmd", required=True)

    def add(name, fn, help):
        p = sub.add_parser(name, help=help)
        p.add_argument("program", help="a STeP program file (defines program())")
        p.add_argument("-p", "--param", action="append", metavar="KEY=VALUE",
                       help="a keyword parameter of program()")
        p.set_defaults(fn=fn)
        return p

    k = add("check", cmd_check, "print every edge's symbolic shape and the program's metrics")
    k.add_argument("--trace", metavar="T", help="a trace (JSON): the metrics with its values")
    g = add("graph", cmd_graph, "write a DOT picture of the program")
    g.add_argument("-o", "--output", help="output file (default: stdout)")
    r = add("run", cmd_run, "compile, simulate in Verilator, check bit for bit, report")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--trace", metavar="T",
                   help="a trace (JSON) supplying parameters and host inputs, e.g. MoE routing")
    r.add_argument("--level", choices=["rtl", "ref", "perf"], default="rtl",
                   help="rtl: Verilog in Verilator (default); ref: the reference interpreter only; "
                        "perf: the performance model's prediction")
    r.add_argument("--fifo-sizing", choices=["rule", "lp"], help="FIFO depths (--level perf)")
    r.add_argument("--config", choices=list(CONFIGS), default="sim")
    r.add_argument("--tile", metavar="RxC", type=tile_arg,
                   help="the hardware tile instead of the config's (with --board: the one the "
                        "bitstream was built with)")
    r.add_argument("--stall", action="store_true", help="random back-pressure on every FIFO and the memory")
    r.add_argument("--watchdog", type=int, default=10_000, help="cycles without progress = deadlock")
    r.add_argument("--waves", action="store_true", help="write dump.vcd")
    r.add_argument("--board", metavar="B", help="run on board B over its UART host link")
    r.add_argument("--port", metavar="P",
                   help="with --board: the serial device (/dev/ttyUSB1), or sim: the board's "
                        "design in Verilator behind a simulated serial line")
    r.add_argument("--timeout", type=float, default=60.0,
                   help="with --board: seconds the run may take (default 60)")
    c = add("compile", cmd_compile, "write Verilog, manifest, DOT picture and symbolic report")
    c.add_argument("-o", "--output", required=True)
    c.add_argument("--config", choices=list(CONFIGS), default="sim")
    c.add_argument("--tile", metavar="RxC", type=tile_arg,
                   help="the hardware tile instead of the config's")
    b = add("build", cmd_build, "synthesize, place and route for an FPGA; report resources, "
                                "Fmax and the worst paths")
    where = b.add_mutually_exclusive_group(required=True)
    where.add_argument("--device", choices=list(DEVICES))
    where.add_argument("--board", help="a board: icebreaker, ulx3s-85f, ulx3s-85f-sdram, orangecrab-85f, "
                                       "tangnano9k (docs/boards.md)")
    b.add_argument("-o", "--output", help="build folder (default: build/PROGRAM-DEVICE)")
    b.add_argument("--seeds", type=int, default=3, help="place-and-route seeds (default 3)")
    b.add_argument("--jobs", type=int, default=2, help="place-and-route runs at once (default 2)")
    b.add_argument("--freq", type=float, metavar="MHZ",
                   help="target clock (default: the device preset's clock)")
    b.add_argument("--trace", metavar="T", help="a trace (JSON) supplying parameters")
    b.add_argument("--tile", metavar="RxC", type=tile_arg,
                   help="the hardware tile instead of the device's or board's preset (4x4 on "
                        "the up5k: 8 MAC16 for GEMV; 1x2 fits GEMM and elementwise on the "
                        "icebreaker)")
    b.add_argument("--synth-flags", metavar="FLAGS", default="",
                   help="with --device: options added to the synthesis command, e.g. "
                        "--synth-flags=-dff on the up5k (shallower logic; if synthesis fails "
                        "with them it runs again without)")
    b.add_argument("--memory", choices=list(MEMORIES), default="bram",
                   help="with --device ecp5-85f: where the tensors live; sdram: the ULX3S's "
                        "SDRAM chip beside the FPGA (its pins become ports of the design; for "
                        "programs whose tensors exceed the block RAM, e.g. SwiGLU at the "
                        "paper's size)")
    b.add_argument("--wide-beats", action="store_true",
                   help="build a program whose tiles larger than the hardware tile move whole, "
                        "one wide beat each (a dynamic tile, or a static one hierarchical "
                        "tiling cannot split); refused by default")
    f = sub.add_parser("flash", help="load a bitstream onto a board with openFPGALoader")
    f.add_argument("--board", required=True,
                   help="icebreaker, ulx3s-85f, ulx3s-85f-sdram, orangecrab-85f or tangnano9k")
    f.add_argument("path", help="a build folder (stepforge build --board) or a bitstream")
    f.set_defaults(fn=cmd_flash)
    z = sub.add_parser("fuzz", help="random programs in the interpreter and Verilator, compared")
    fuzz_arguments(z)
    z.set_defaults(fn=cmd_fuzz)
    w = add("sweep", cmd_sweep, "run a grid of parameters (-p KEY=V1,V2,...) through the model "
                                "or Verilator on Dask; write a table and a plot")
    w.add_argument("--level", choices=["perf", "rtl", "fpga"], default="perf",
                   help="perf: the model; rtl: Verilator; fpga: the model's cycles and a "
                        "place-and-route build per point (--device, --seeds)")
    w.add_argument("--device", choices=list(DEVICES), default="ecp5-85f",
                   help="--level fpga: the device (its preset replaces --config)")
    w.add_argument("--seeds", type=int, default=1, help="--level fpga: place-and-route seeds")
    w.add_argument("--workers", type=int, default=2, help="local Dask workers (0: no Dask)")
    w.add_argument("--scheduler", metavar="ADDRESS", help="an existing Dask scheduler")
    w.add_argument("-o", "--output", default="sweep", help="output prefix (.csv, .json, .svg)")
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--trace", metavar="T", help="a trace (JSON) supplying parameters and inputs")
    w.add_argument("--config", choices=list(CONFIGS), default="sim")
    w.add_argument("--tile", metavar="RxC", type=tile_arg,
                   help="the hardware tile instead of the config's")
    w.add_argument("--fifo-sizing", choices=["rule", "lp"])
    args = parser.parse_args(argv)
    try:
        if getattr(args, "trace", None):
            args.trace_data = load_trace(args.trace)
        return args.fn(args)
    except (Exception, KeyboardInterrupt, SystemExit) as e:
        status = exit_status(e)      # a user's mistake in words (loader.EXIT_CODES), no traceback
        if status is None:
            raise
        return status


if __name__ == "__main__":
    sys.exit(main())
