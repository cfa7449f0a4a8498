"""What every ``coldkeep`` command shares: its context (config, --json, --wait),
the options, running its coroutine with progress and SIGINT/SIGTERM as a
graceful stop, and mapping failures to one line and an exit code.

Exit codes: 0 done, 1 failed or something needs attention, 2 bad usage or
config, 3 the archive lock is held by another process (the message names it).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, ParamSpec, TypeVar

import click

from coldkeep.core.archiver import Archiver
from coldkeep.core.base.cancel import CancelToken
from coldkeep.core.base.config import Settings, default_config_path, load_settings
from coldkeep.core.base.errors import EXIT_FAILED, EXIT_LOCKED, explain
from coldkeep.core.base.steps import StepInfo, StepName, no_step
from coldkeep.core.base.stream import EventStream

from ..text.fmt import shown, terminal_text
from .progress import Reporter

if TYPE_CHECKING:
    from coldkeep.core.remote.sealing import Identities

# Test seams: kill this process with SIGKILL (``KILL_ENV``), or raise an error
# nothing expects (``RAISE_ENV``: a bug, as the pass and the CLI must report it),
# when the named protocol step is announced (``step`` or ``step:N`` for its N-th
# time). The crash and failure tests use them on the real CLI; they do nothing
# unless set.
KILL_ENV = "COLDKEEP_TEST_KILL_AT"
RAISE_ENV = "COLDKEEP_TEST_RAISE_AT"

P = ParamSpec("P")
T = TypeVar("T")


class InjectedFault(RuntimeError):
    """The error ``RAISE_ENV`` raises: one no code path expects."""


def kill_hook() -> Any:
    kill, fault = os.environ.get(KILL_ENV), os.environ.get(RAISE_ENV)
    if not kill and not fault:
        return no_step
    seen: dict[str, int] = {}

    def due(spec: str | None, step: StepName) -> bool:
        name, _, nth = (spec or "").partition(":")
        if step != name:
            return False
        seen[spec or ""] = seen.get(spec or "", 0) + 1
        return seen[spec or ""] >= int(nth or 1)

    async def hook(step: StepName, info: StepInfo) -> None:
        if due(kill, step):
            os.kill(os.getpid(), signal.SIGKILL)
        if due(fault, step):
            raise InjectedFault(f"injected at step {step} ({RAISE_ENV})")

    return hook


class Context:
    def __init__(self, config: Path | None, json_out: bool, wait: float) -> None:
        self.config_path = config or default_config_path()
        self.json = json_out
        self.wait = wait
        self.stream = EventStream()
        self.cancel = CancelToken()
        self._settings: Settings | None = None
        self._results: list[str] = []  # printed once the progress display is gone

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.config_path)
            for warning in self._settings.warnings:
                warn(warning)
        return self._settings

    def archiver(self) -> Archiver:
        return Archiver(self.settings, stream=self.stream, step=kill_hook(), wait=self.wait)

    def emit(self, command: str, ok: bool, result: Any, text: Callable[[], str]) -> None:
        """The result: a JSON document, or text for a person. It is printed when
        the command's progress has ended (``run_command``): a bar still drawn on
        the terminal would otherwise run into its first line."""
        if self.json:
            doc = {"command": command, "ok": ok, "result": result}
            self._results.append(json.dumps(doc, indent=2, sort_keys=True, default=str))
        else:
            self._results.append(text())

    def print_results(self) -> None:
        for out in self._results:
            # JSON escapes what it must itself; text is made safe for a terminal
            # (a name's ESC or undecodable byte shown as \x1b, \xe9).
            click.echo(out if self.json else terminal_text(out))
        self._results.clear()


def whole_writes() -> None:
    """Give stdout a buffered layer when it has none. Under ``python -u`` or
    PYTHONUNBUFFERED (set in many container images) stdout's binary layer is the
    raw file: one write(2) a call, and a write to a full pipe that a signal
    interrupts midway returns short. The text layer drops the rest without a word
    (and so did ``cat``'s output: 640 KiB of a 3 MiB file, exit 0). A
    BufferedWriter goes on where a short write stopped; output still goes out as
    it comes (each line, and every write ``cat`` and click flush). The original
    stream stays as it was: ``sys.__stdout__`` is still usable."""
    stream = sys.stdout
    if not isinstance(getattr(stream, "buffer", None), io.RawIOBase):
        return
    raw = io.FileIO(stream.fileno(), "wb", closefd=False)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw),
        encoding=stream.encoding,
        errors=stream.errors,
        line_buffering=True,
        write_through=True,
    )


def run_command(coro: Awaitable[int], ctx: Context, *, progress: bool = True) -> None:
    """Run a command's coroutine with progress on stderr; map failures to exit codes.
    SIGINT / SIGTERM cancel gracefully at the next safe point. What the command
    emitted is printed after the progress display has closed (its bars erased,
    its last line ended). ``progress=False``: no display at all (a command whose
    stdout is data bound for a pager on the same terminal)."""

    async def main() -> int:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(coro)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, ctx.cancel.cancel, f"signal {sig.name}")
        async with Reporter(ctx.stream, quiet=not progress):
            return await task

    try:
        code = asyncio.run(main())
    except Exception as err:  # noqa: BLE001 - every error ends in one line and its code
        code, line = explain(err) or _unexpected(err)
        if code == EXIT_LOCKED:
            line += "; try again when it finishes, or pass --wait SECONDS"
        ctx.print_results()
        fail(line, code, ctx)
    ctx.print_results()
    raise SystemExit(code)


def _unexpected(err: BaseException) -> tuple[int, str]:
    """A bug: its traceback on stderr for the report, and the one line that
    says what it means for the operator."""
    traceback.print_exception(err)
    first = (str(err).strip().splitlines() or [""])[0]
    return EXIT_FAILED, (
        f"stopped on an unexpected error: {type(err).__name__}: {first} "
        "(a bug: please report it with the traceback above)"
    )


def warn(line: str) -> None:
    """One warning line on stderr: what the command goes on despite."""
    click.echo(f"coldkeep: warning: {shown(line)}", err=True)


def identities_for(path: Path | None) -> Identities | None:
    """The keys of ``--identity FILE`` (None without one), their warnings said."""
    # Here, not at the top: the operations' declarations are loaded by the
    # commands made from them, and ``status`` is not one.
    from ..operations.spec import load_identity  # noqa: PLC0415

    identities = load_identity(path)
    for line in identities.warnings if identities is not None else ():
        warn(line)
    return identities


def fail(message: str, code: int, ctx: Context | None = None) -> NoReturn:
    """One line on stderr; with --json, also the document stdout promises."""
    click.echo(f"coldkeep: {shown(message)}", err=True)
    if ctx is not None and ctx.json:
        name = click.get_current_context().info_name
        doc = {"command": name, "ok": False, "error": message, "result": None}
        click.echo(json.dumps(doc, indent=2, sort_keys=True))
    raise SystemExit(code)


def fail_explained(err: BaseException) -> NoReturn:
    """End on ``err`` as ``run_command`` does, for a command that runs outside
    it: one line and its code, or, for a bug, ``err`` raised again."""
    said = explain(err)
    if said is None:
        raise err
    fail(said[1], said[0])


def reader_left() -> None:
    """A reader of stdout that closed the pipe (``| head``): stdout pointed at
    /dev/null, so that the interpreter's last flush says nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


# The options every command shares, as click's declarations and attributes.
_Spec = tuple[tuple[str, ...], dict[str, Any]]
_WAIT: _Spec = (
    ("--wait",),
    {
        "type": float,
        "default": 0.0,
        "show_default": True,
        "metavar": "SECONDS",
        "help": "Wait this long for another process's archive lock.",
    },
)
_JSON: _Spec = (("--json", "json_out"), {"is_flag": True, "help": "One JSON document on stdout."})
_CONFIG: _Spec = (
    ("--config", "config"),
    {
        "type": click.Path(path_type=Path, dir_okay=False),
        "help": "coldkeep.toml (default: $COLDKEEP_CONFIG or ./coldkeep.toml).",
    },
)


def _shared(json_opt: bool, wait_opt: bool) -> list[_Spec]:
    """In the order --help lists them, after the command's own."""
    return [*([_WAIT] if wait_opt else []), *([_JSON] if json_opt else []), _CONFIG]


def shared_options(*, json_opt: bool = True, wait_opt: bool = False) -> list[click.Parameter]:
    """The options every command shares, for a command made without decorators."""
    return [click.Option(list(decls), **attrs) for decls, attrs in _shared(json_opt, wait_opt)]


def command(
    *, json_opt: bool = True, wait_opt: bool = False
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """The options every command shares, as a decorator."""

    def wrap(fn: Callable[P, T]) -> Callable[P, T]:
        for decls, attrs in reversed(_shared(json_opt, wait_opt)):
            fn = click.option(*decls, **attrs)(fn)
        return fn

    return wrap


def ctx_for(config: Path | None, json_out: bool = False, wait: float = 0.0) -> Context:
    """A command's context; its own --config, else the one given before the command."""
    if config is None:
        root = click.get_current_context(silent=True)
        config = root.find_root().params.get("config") if root else None
    return Context(config, json_out, wait)
