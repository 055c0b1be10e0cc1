"""Run options for TorchX-backed runners: the spec's `runner.cfg` merged with `.torchxconfig`.

TorchX users keep per-scheduler defaults in a `.torchxconfig` INI file
(`[slurm]`, `[kubernetes]` sections; the file named by `$TORCHXCONFIG`, else
`~/.torchxconfig` and `./.torchxconfig`, the earlier one winning, as in TorchX). nasctl reads it with TorchX's own loader, so values are
typed the way `torchx run` types them. Keys in the spec's `runner.cfg` take
precedence over the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Set
from pathlib import Path
from typing import Any

from nasctl.errors import SpecError


def split_cfg(scheduler: str, cfg: Mapping[str, Any] | None, own: Set[str],
              reserved: Set[str] = frozenset()) -> tuple[dict[str, Any], dict[str, Any]]:
    """Split a spec's `runner.cfg` into TorchX run options and nasctl's own options.

    TorchX options missing from `cfg` are filled from `.torchxconfig`.

    Args:
        scheduler: the TorchX scheduler name (`slurm`, `kubernetes`).
        cfg: `runner.cfg` from the spec.
        own: keys nasctl interprets itself (never passed to TorchX).
        reserved: TorchX options nasctl sets per trial and refuses from the spec.

    Returns:
        (TorchX run options, nasctl options).

    Raises:
        SpecError: a key is neither a TorchX run option of this scheduler nor one of `own`,
            or is reserved.
    """
    from torchx.runner.config import apply
    from torchx.schedulers import get_scheduler_factories

    factory = get_scheduler_factories()[scheduler]
    runopts = factory("nasctl").run_opts()
    known = {name for name, _ in runopts}
    cfg = dict(cfg or {})
    bad = sorted(set(cfg) - known - set(own))
    if bad:
        raise SpecError(f"runner.cfg has options {bad} that {scheduler} does not take",
                        f"allowed: {sorted((known - set(reserved)) | set(own))}")
    taken = sorted(set(cfg) & set(reserved))
    if taken:
        raise SpecError(f"runner.cfg sets {taken}, which nasctl sets for each trial",
                        f"remove {', '.join(taken)} from runner.cfg")
    mine = {k: v for k, v in cfg.items() if k in own}
    theirs = {k: v for k, v in cfg.items() if k in known}
    try:
        # TorchX's default directories are fixed when it is imported; look where it would look now
        apply(scheduler, theirs, dirs=[str(Path.home()), os.getcwd()])
    except (ValueError, TypeError, FileNotFoundError) as e:
        raise SpecError(f"could not read .torchxconfig for {scheduler}: {e}", "fix the [%s] section" % scheduler) from e
    for k in reserved:
        theirs.pop(k, None)
    return theirs, mine
