"""The `minispore` command line: `minispore info | train | generate`.

    minispore info                 versions, dtypes, backends, packaged data (`--json` for scripts)
    minispore train [...]          train the tiny LLaMA (see `minispore train --help`)
    minispore generate [...]       sample text from a trained checkpoint
    minispore run -n N script.py   run a script on N processes (MPI; `msrun` is the same launcher)

`info` lives here. `train` and `generate` belong to the model code: their arguments and their work
come from `minispore.llm.cli_commands` (`add_train_args(parser)`, `run_train(args)`,
`add_generate_args(parser)`, `run_generate(args)`), imported only when one of those commands runs,
so `minispore info` and `minispore --help` stay fast and work even if the model code cannot load.

Every command returns an exit status: 0 success, 1 a minispore error (printed as one clear line,
no traceback), 2 bad usage, 130 interrupted by Ctrl-C. A usage error prints the command's own
usage (`minispore train --max-itres 5` shows `minispore train`'s, not the top level's) and, for a
mistyped flag or command, the closest known one ("did you mean --max-iters?"; argparse's own
`suggest_on_error` exists only from Python 3.14). Error lines leave out the "(at file:line)" that
minispore errors carry for library users: from the command line that place is the launcher
script, which says nothing.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import platform
import re
import sys
from importlib import metadata

PROG = "minispore"

# Registration points for commands implemented elsewhere: name -> (module, add-args function,
# run function, one-line help). The module is imported lazily, only when the command is used.
LAZY_COMMANDS = {
    "train": ("minispore.llm.cli_commands", "add_train_args", "run_train",
              "train a LLaMA-style model on Tiny Shakespeare (checkpoints, metrics.json, loss.png)"),
    "generate": ("minispore.llm.cli_commands", "add_generate_args", "run_generate",
                 "generate text from a trained checkpoint"),
    "dryrun": ("minispore.llm.dryrun_command", "add_dryrun_args", "run_dryrun",
               "predict memory, FLOPs and step time of a LLaMA preset without running it (DryRun)"),
    "simulate": ("minispore.parallel.simulator.cli", "add_simulate_args", "run_simulate",
                 "simulate TP+SP LLaMA layers on two streams per rank: hidden communication, 1 vs 2 copies"),
    "run": ("minispore.communication.launcher", "add_run_args", "run_run",
            "run a script on N processes over MPI (msrun's alias: minispore run -n N script.py)"),
}

OPTIONAL_PACKAGES = {            # distribution -> the extra that installs it
    "tqdm": None, "matplotlib": "plot", "torch": "torch", "mkdocs-material": "docs",
    "mpi4py": "dist", "mpich": "dist",
}


# ---------------------------------------------------------------------------------------------
# minispore info
def _version(dist: str):
    """An installed distribution's version without importing it (importing torch takes seconds)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _backends() -> tuple[list, dict]:
    """([{name, current, status}], {name: info}) for the built-in CPU backend and every plugin entry
    point; `info` is what a loaded backend's own `info()` says (the Ascend plugin: emulator or CANN)."""
    from .backend import registry
    current = registry.current_backend().name
    out, details = [], {}
    for name in registry.available_backends():
        try:
            backend = registry.get_backend(name)
            status = f"ok ({type(backend).__module__}.{type(backend).__name__})"
            try:
                details[name] = {str(k): _jsonable(v) for k, v in backend.info().items()}
            except Exception as e:      # noqa: BLE001 - a plugin's info() must not break `minispore info`
                details[name] = {"info() failed": f"{type(e).__name__}: {e}"}
        except Exception as e:          # noqa: BLE001 - a broken plugin is reported, not fatal
            cause = e.__cause__ if isinstance(e.__cause__, Exception) else e   # the plugin's own error
            status = f"failed to load: {type(cause).__name__}: {cause}"
        out.append({"name": name, "current": name == current, "status": status})
    return out, details


def _jsonable(value):
    """A plugin's info() value as something json.dumps accepts (falls back to str)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def info_dict() -> dict:
    """Everything `minispore info` reports, as a JSON-compatible dict."""
    import ml_dtypes
    import numpy as np

    import minispore
    from .common import dtype as mstype
    from .ops.primitive import PRIMITIVES

    try:
        from .dataset.text import TINYSHAKESPEARE_FILE
        from importlib import resources
        data_file = resources.files("minispore").joinpath("data", TINYSHAKESPEARE_FILE)
        data = {"tinyshakespeare": len(data_file.read_bytes())}
    except (OSError, ImportError):
        data = {"tinyshakespeare": None}

    backends, backend_info = _backends()
    from .backend import registry
    return {
        "minispore": minispore.__version__,
        "location": minispore.__path__[0],
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "executable": sys.executable,
        "platform": platform.platform(),
        "numpy": np.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "safetensors": _version("safetensors"),
        "optional": {dist: _version(dist) for dist in OPTIONAL_PACKAGES},
        "dtypes": [str(d) for d in mstype.ALL_DTYPES],
        "backends": backends,
        "backend_info": backend_info,
        # MINISPORE_DEVICE_TARGET naming a backend that could not be selected (None: fine or unset)
        "device_target_error": registry.environment_error(),
        "primitives": len(PRIMITIVES),
        "data_bytes": data,
    }


def _format_info(info: dict) -> str:
    def row(label, value):
        return f"{label:<13}{value}"

    optional = []
    for dist, version in info["optional"].items():
        extra = OPTIONAL_PACKAGES[dist]
        hint = f" (pip install 'minispore[{extra}]')" if extra else ""
        optional.append(f"{dist} {version}" if version else f"{dist} not installed{hint}")
    backends = []
    for b in info["backends"]:
        backends.append(f"{b['name']}{' (current)' if b['current'] else ''}: {b['status']}")
        backends += [f"  {key}: {value}" for key, value in info.get("backend_info", {}).get(b["name"], {}).items()]
    size = info["data_bytes"]["tinyshakespeare"]
    lines = [
        row("minispore", f"{info['minispore']}  ({info['location']})"),
        row("Python", f"{info['python']} {info['python_implementation']}  ({info['executable']})"),
        row("platform", info["platform"]),
        row("NumPy", info["numpy"]),
        row("ml_dtypes", info["ml_dtypes"]),
        row("safetensors", info["safetensors"] or "not installed"),
        row("optional", optional[0]),
        *[row("", o) for o in optional[1:]],
        row("dtypes", ", ".join(info["dtypes"])),
        row("backends", backends[0]),
        *[row("", b) for b in backends[1:]],
        *([row("", f"warning: {info['device_target_error']}")] if info.get("device_target_error") else []),
        row("primitives", f"{info['primitives']} registered"),
        row("data", f"tinyshakespeare.txt ({size:,} bytes)" if size is not None else "tinyshakespeare.txt MISSING"),
    ]
    return "\n".join(lines)


def add_info_args(parser):
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


def run_info(args) -> int:
    info = info_dict()
    print(json.dumps(info, indent=2) if args.json else _format_info(info))
    return 0


# ---------------------------------------------------------------------------------------------
# Parser and dispatch
def build_parser() -> tuple[argparse.ArgumentParser, dict]:
    """The top-level parser and {command: subparser}. Lazy commands get their arguments in `main`."""
    import minispore
    parser = argparse.ArgumentParser(
        prog=PROG, description="minispore: a readable NumPy re-implementation of MindSpore's ideas.")
    parser.add_argument("--version", action="version", version=f"{PROG} {minispore.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers = {}
    info = sub.add_parser("info", help="versions, dtypes and backends found",
                          description="Show versions, dtypes, backends and packaged data.")
    add_info_args(info)
    info.set_defaults(run=run_info)
    subparsers["info"] = info
    for name, (_, _, _, help_text) in LAZY_COMMANDS.items():
        subparsers[name] = sub.add_parser(name, help=help_text, description=help_text[:1].upper() + help_text[1:] + ".")
    return parser, subparsers


def _first_command(argv) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
        if arg in ("-h", "--help", "--version"):
            return None
    return None


def _load_lazy_command(name: str, subparser) -> None:
    """Import the module behind `name`, let it add its arguments, and set its run function."""
    module_name, add_fn, run_fn, _ = LAZY_COMMANDS[name]
    module = importlib.import_module(module_name)
    getattr(module, add_fn)(subparser)
    subparser.set_defaults(run=getattr(module, run_fn))


def _did_you_mean(word: str, candidates) -> str:
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"; did you mean {close[0]}?" if close else ""


def _unrecognized(extras, parser) -> str:
    """argparse's 'unrecognized arguments' message, plus the closest flag of `parser` to the first
    unknown flag (`--max-itres=5` is matched by its name)."""
    flags = [s for action in parser._actions for s in action.option_strings]
    unknown = [a.split("=", 1)[0] for a in extras if a.startswith("-") and a != "-"]
    hint = _did_you_mean(unknown[0], flags) if unknown else ""
    return f"unrecognized arguments: {' '.join(extras)}{hint}"


# "(at /path/bin/minispore:8 in <module>)" / "(at <frozen runpy>:88 in _run_code)": where a
# minispore error was raised from, in the caller's code. Useful in a library, noise in a CLI.
_LOCATION = re.compile(r" ?\(at (?:[^()\n]*?:\d+ in [^()\n]*|<minispore internals>)\)")


def error_line(error) -> str:
    """The one line a CLI prints for a minispore error: its message without the call location."""
    return _LOCATION.sub("", str(error)).strip()


def main(argv=None) -> int:
    """Entry point of the `minispore` console script and of `python -m minispore`."""
    from .common.errors import MinisporeError
    argv = list(sys.argv[1:] if argv is None else argv)
    parser, subparsers = build_parser()
    command = _first_command(argv)
    if command is not None and command not in subparsers:
        parser.error(f"argument COMMAND: invalid choice: {command!r} (choose from "
                     f"{', '.join(map(repr, subparsers))}){_did_you_mean(command, subparsers)}")
    if command in LAZY_COMMANDS:
        try:
            _load_lazy_command(command, subparsers[command])
        except MinisporeError as e:                 # e.g. a missing optional dependency, naming the extra
            print(f"{PROG} {command}: error: {error_line(e)}", file=sys.stderr)
            return 1
        except ImportError as e:
            print(f"{PROG} {command}: error: this command is not available: {LAZY_COMMANDS[command][0]} "
                  f"could not be imported ({type(e).__name__}: {e})", file=sys.stderr)
            return 1
        except AttributeError as e:
            print(f"{PROG} {command}: error: {LAZY_COMMANDS[command][0]} does not provide the command "
                  f"({e})", file=sys.stderr)
            return 1
    args, extras = parser.parse_known_args(argv)     # exits with status 2 on bad usage
    if extras:                                       # reported with the command's usage, not the top level's
        (subparsers.get(args.command) or parser).error(_unrecognized(extras, subparsers.get(args.command) or parser))
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        status = args.run(args)
    except MinisporeError as e:
        print(f"{PROG} {args.command}: error: {error_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\n{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:                          # `minispore info | head`: the reader left early
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except OSError as e:                             # the file system said no (disk full, permissions)
        where = f": '{e.filename}'" if e.filename else ""
        print(f"{PROG} {args.command}: error: {e.strerror or e}{where}", file=sys.stderr)
        return 1
    except MemoryError:                              # past the up-front estimates: still one line
        print(f"{PROG} {args.command}: error: out of memory (MemoryError); use smaller sizes, or set "
              f"MINISPORE_MEMORY_LIMIT to have minispore refuse such jobs before they start", file=sys.stderr)
        return 1
    return 0 if status is None else int(status)


if __name__ == "__main__":
    sys.exit(main())
