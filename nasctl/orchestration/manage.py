"""Managing experiments: notes, renaming and removal (with their files, on request).

What the CLI (`nasctl rename`, `nasctl rm`) and the dashboard call. An
experiment that some process drives (RUNNING or QUEUED, or with a live
orchestrator) is neither renamed nor removed: the caller is told to stop it
first. Removing files is confined to the experiment's own recorded work
directory and never follows a symbolic link out of it.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

from nasctl.errors import BadInputError
from nasctl.spec import NAME_RE
from nasctl.store import Store
from nasctl.store import manage as store_manage
from nasctl.types import ExperimentRecord, ExperimentStatus


def is_busy(exp: ExperimentRecord) -> bool:
    """Is some process driving the experiment, or about to (the service's queue)?"""
    from nasctl.orchestration.views import orchestrator_alive

    return exp.status in (ExperimentStatus.RUNNING, ExperimentStatus.QUEUED) or orchestrator_alive(exp)


def check_name(name: str) -> str:
    """The rule `nasctl run --name` applies (the spec's `name`).

    Raises:
        BadInputError: the name breaks it.
    """
    if not NAME_RE.match(name):
        raise BadInputError(
            f"{name!r} is not a valid experiment name",
            "use 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit",
        )
    return name


def rename(store: Store, old: str, new: str) -> dict[str, Any]:
    """Rename experiment `old` to `new`. Its work directory stays where it is recorded.

    Raises:
        BadInputError: `new` is not a valid name.
        NotFoundError: no experiment `old`.
        AlreadyExistsError: `new` is taken.
        ExperimentBusyError: `old` is being driven.
    """
    check_name(new)
    exp = store.get_experiment(old)
    renamed = store_manage.rename_experiment(store, exp.id, new, is_busy)
    return {"experiment": new, "old_name": old, "work_dir": renamed.work_dir}


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _files_plan(store: Store, exp: ExperimentRecord) -> tuple[Path | None, str | None]:
    """The folder `nasctl rm --files` would remove, or why none is removed."""
    raw = Path(exp.work_dir)
    if not raw.is_absolute():
        return None, f"its recorded work directory {exp.work_dir!r} is not an absolute path"
    try:
        st = os.lstat(raw)
    except FileNotFoundError:
        return None, f"its work directory {raw} does not exist"
    if stat.S_ISLNK(st.st_mode):
        return None, f"its work directory {raw} is a symbolic link (links are never followed)"
    if not stat.S_ISDIR(st.st_mode):
        return None, f"its work directory {raw} is not a folder"
    root = raw.resolve()
    if root == Path(root.anchor) or root == Path.home().resolve():
        return None, f"its work directory {root} is a filesystem root or a home folder"
    for other, other_dir in store_manage.work_dirs(store).items():
        if other == exp.name:
            continue
        o = Path(other_dir)
        if o.is_absolute() and (_inside(o.resolve(), root) or _inside(root, o.resolve())):
            return None, f"its work directory {root} also holds the files of experiment {other!r}"
    return root, None


def removal_plan(store: Store, name: str, files: bool) -> dict[str, Any]:
    """What `remove` would do: the experiment, its trial count, the folder it would delete."""
    exp = store.get_experiment(name)
    folder, why = _files_plan(store, exp) if files else (None, None)
    return {"experiment": name, "status": exp.status.value, "work_dir": exp.work_dir,
            "trials": store_manage.trial_count(store, exp.id), "busy": is_busy(exp),
            "files": str(folder) if folder else None, "files_kept_because": why}


def remove(store: Store, name: str, files: bool = False) -> dict[str, Any]:
    """Remove experiment `name`: all its rows in one transaction and, with `files`,
    its recorded work directory (only that folder, links inside it are removed,
    not followed; a folder shared with another experiment is kept).

    Raises:
        NotFoundError: no such experiment.
        ExperimentBusyError: it is being driven.
    """
    exp = store.get_experiment(name)
    folder, why = _files_plan(store, exp) if files else (None, None)
    counts = store_manage.delete_experiment(store, exp.id, is_busy)
    removed, error = None, None
    if folder is not None:
        try:
            shutil.rmtree(folder)  # fd-based on Linux: a link inside is unlinked, never followed
            removed = str(folder)
        except OSError as e:
            error = f"{e.filename or folder}: {e.strerror or e}"
    return {"experiment": name, "removed_rows": counts, "removed_files": removed,
            "files_kept_because": why, "files_error": error}
