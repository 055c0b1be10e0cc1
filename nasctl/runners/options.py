"""A runner's `runner.cfg` options, declared in one place and checked there.

A TorchX-backed runner takes two kinds of keys in `runner.cfg`:

- TorchX's run options for its scheduler, exactly as the scheduler's `run_opts()`
  declares them (name, type, default, help, required). nasctl passes them to TorchX.
  Those missing from the spec are read from `.torchxconfig` where the runner says so
  (`[slurm]`, `[kubernetes]` sections; the file named by `$TORCHXCONFIG`, else
  `~/.torchxconfig` and `./.torchxconfig`, the earlier one winning, as in TorchX),
  with TorchX's own loader, so values are typed the way `torchx run` types them.
  Keys in the spec win over the file.
- nasctl's own (`Option`): never passed to TorchX. An own option may take over a
  TorchX option of the same name (nasctl then decides what TorchX gets).

The control settings every runner takes (`poll_interval`, `lost_after`,
`unreachable_timeout`) are `Option`s too, declared in `nasctl.runners.polling`;
`get_runner` takes them out before a runner sees its cfg.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nasctl.errors import SpecError


@dataclass(frozen=True)
class Option:
    """One of nasctl's own `runner.cfg` keys.

    Attributes:
        name: the key.
        type: its type in words, for help (`int`, `str`, `list of device indices`).
        help: what it does.
        default: the value when the key is absent (or null).
        check: the value as the runner uses it, from the value given; raises a
            one-line `SpecError` naming `runner.cfg.<name>` and the fix. None takes
            the value as given.
        required: the key must be given, and not empty.
    """

    name: str
    type: str
    help: str
    default: Any = None
    check: Callable[[Any], Any] | None = None
    required: bool = False

    def value(self, given: Any) -> Any:
        """The checked value of `given` (the default for None)."""
        if given is None:
            return self.default
        return self.check(given) if self.check is not None else given


def positive_int(name: str, example: str) -> Callable[[Any], int]:
    """A check for an integer >= 1 (`example` shows one in the fix)."""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"runner.cfg.{name} must be a positive integer, got {value!r}", f"use e.g. {example}")
        return value

    return check


@functools.cache
def torchx_run_opts(scheduler: str) -> Any:
    """The `runopts` TorchX's scheduler declares (its run options, typed, with help)."""
    from torchx.schedulers import get_scheduler_factories

    return get_scheduler_factories()[scheduler]("nasctl").run_opts()


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


@dataclass(frozen=True)
class RunOptions:
    """Every `runner.cfg` key a TorchX-backed runner takes, and how each is checked.

    Attributes:
        scheduler: the TorchX scheduler name (`local_cwd`, `slurm`, `kubernetes`).
        own: nasctl's own options.
        reserved: TorchX options nasctl sets for each trial; refused in the spec.
        torchxconfig: whether TorchX options missing from the spec are read from
            `.torchxconfig`.
    """

    scheduler: str
    own: tuple[Option, ...] = ()
    reserved: frozenset[str] = frozenset()
    torchxconfig: bool = False

    def torchx_names(self) -> set[str]:
        """TorchX's run options of the scheduler that nasctl passes on (not taken over by an own one)."""
        own = {o.name for o in self.own}
        return {name for name, _ in torchx_run_opts(self.scheduler)} - own

    def allowed(self) -> list[str]:
        """The keys a spec may set."""
        return sorted((self.torchx_names() - self.reserved) | {o.name for o in self.own})

    def describe(self) -> str:
        """Every key with its type, default and help (what `torchx runopts` prints, plus nasctl's)."""
        lines = []
        for name, opt in torchx_run_opts(self.scheduler):
            if name in self.torchx_names() - self.reserved:
                lines.append(f"{name} ({_type_name(opt.opt_type)}, {'required' if opt.is_required else opt.default}"
                             f", TorchX): {' '.join(opt.help.split())}")
        for o in self.own:
            lines.append(f"{o.name} ({o.type}, {'required' if o.required else o.default}): {o.help}")
        return "\n".join(lines)

    def resolve(self, cfg: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Check a spec's `runner.cfg` (control settings already taken out).

        Returns:
            (TorchX run options: the spec's, then `.torchxconfig`'s, then TorchX's
            defaults that are not None; nasctl's own options, every one of them,
            checked, defaults filled in).

        Raises:
            SpecError: a key that is not an option, a reserved one, a value of the
                wrong type or that its check refuses, a required one missing, or an
                unreadable `.torchxconfig`. One line each, naming the key and the fix.
        """
        cfg = dict(cfg or {})
        theirs_known = self.torchx_names()
        own = {o.name: o for o in self.own}
        bad = sorted(set(cfg) - theirs_known - set(own))
        if bad:
            raise SpecError(f"runner.cfg has options {bad} that {self.scheduler} does not take",
                            f"allowed: {self.allowed()}")
        taken = sorted(set(cfg) & self.reserved)
        if taken:
            raise SpecError(f"runner.cfg sets {taken}, which nasctl sets for each trial",
                            f"remove {', '.join(taken)} from runner.cfg")
        theirs = {k: v for k, v in cfg.items() if k in theirs_known}
        if self.torchxconfig:
            theirs = self._with_torchxconfig(theirs)
        theirs = self._checked_torchx(theirs)
        mine = {name: o.value(cfg.get(name)) for name, o in own.items()}
        required = [name for name, opt in torchx_run_opts(self.scheduler) if opt.is_required and name in theirs_known]
        required += [o.name for o in self.own if o.required]
        missing = [k for k in required if not (theirs if k in theirs_known else mine).get(k)]
        if missing:
            raise SpecError(f"runner.cfg for {self.scheduler} lacks {missing}",
                            f"set {', '.join(required[:-1])} and {required[-1]} (see the README)"
                            if len(required) > 1 else f"set {required[0]}")
        return theirs, mine

    def _with_torchxconfig(self, theirs: dict[str, Any]) -> dict[str, Any]:
        from torchx.runner.config import apply

        theirs = dict(theirs)
        try:
            # TorchX's default directories are fixed when it is imported; look where it would look now
            apply(self.scheduler, theirs, dirs=[str(Path.home()), os.getcwd()])
        except (ValueError, TypeError, FileNotFoundError) as e:
            raise SpecError(f"could not read .torchxconfig for {self.scheduler}: {e}",
                            f"fix the [{self.scheduler}] section") from e
        return {k: v for k, v in theirs.items() if k not in self.reserved}

    def _checked_torchx(self, theirs: dict[str, Any]) -> dict[str, Any]:
        """TorchX's values typed as its run options declare, TorchX's non-None defaults filled in."""
        opts = torchx_run_opts(self.scheduler)
        out = dict(theirs)
        for name, opt in opts:
            if name not in self.torchx_names() or name in self.reserved:
                continue
            value = out.get(name)
            if value is None:
                if opt.default is not None:
                    out[name] = opt.default
                continue
            if not opts.is_type(value, opt.opt_type):
                kind = _type_name(opt.opt_type)
                fix = f'quote it: {name}: "{value}"' if opt.opt_type is str else f"give a {kind}"
                raise SpecError(f"runner.cfg.{name} must be a {kind} for {self.scheduler}, got {value!r}", fix)
        return out


__all__ = ["Option", "RunOptions", "positive_int", "torchx_run_opts"]
