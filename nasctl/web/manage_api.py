"""The JSON API for managing experiments: notes, rename and delete.

Reads need nothing; writes need the dashboard's token (as stop and cancel do).
Handlers call `nasctl.orchestration.manage` and `nasctl.store.manage`; an
experiment that is being driven answers 409 with the fix (stop it first).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request
from pydantic import BaseModel, Field

from nasctl.errors import AlreadyExistsError, ExperimentBusyError
from nasctl.orchestration import manage
from nasctl.store import manage as store_manage
from nasctl.web import serializers
from nasctl.errors import ConflictError
from nasctl.web.api import WRITE_RESPONSES, ErrorBody, Name, require_token, state

router = APIRouter(
    prefix="/api",
    responses={
        400: {"model": ErrorBody, "description": "bad input (an invalid name, a note that is too long)"},
        404: {"model": ErrorBody, "description": "no such experiment or trial"},
        503: {"model": ErrorBody, "description": "the database cannot be reached"},
    },
)
MANAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    **WRITE_RESPONSES,
    409: {"model": ErrorBody, "description": "the experiment is being driven (stop it first), or the name is taken"},
}
Index = Annotated[int, Path(ge=0, le=2**31 - 1)]


class NoteBody(BaseModel):
    """A note in markdown; empty text removes it."""

    text: str = Field(max_length=store_manage.MAX_NOTE_CHARS)


class RenameBody(BaseModel):
    """The experiment's new name (1-63 letters, digits, '_', '.' or '-', starting with a letter or digit)."""

    name: str = Field(max_length=255)


def experiment_note(request: Request, experiment_id: int, trial_index: int | None = None) -> dict[str, Any]:
    return serializers.note(store_manage.get_note(state(request).store, experiment_id, trial_index))


@router.get("/experiments/{name}/note", summary="The experiment's note (markdown)")
def get_experiment_note(request: Request, name: Name) -> dict[str, Any]:
    exp = state(request).store.get_experiment(name)
    return experiment_note(request, exp.id)


@router.put("/experiments/{name}/note", summary="Set the experiment's note (token; empty text removes it)",
            responses=WRITE_RESPONSES)
def put_experiment_note(
    request: Request, name: Name, body: Annotated[NoteBody, Body()],
    authorization: Annotated[str | None, Header()] = None, x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    exp = st.store.get_experiment(name)
    return serializers.note(store_manage.set_note(st.store, exp.id, body.text))


@router.get("/experiments/{name}/trials/{index}/note", summary="A trial's note (markdown)")
def get_trial_note(request: Request, name: Name, index: Index) -> dict[str, Any]:
    st = state(request)
    exp = st.store.get_experiment(name)
    st.store.get_trial(exp.id, index)
    return experiment_note(request, exp.id, index)


@router.put("/experiments/{name}/trials/{index}/note", summary="Set a trial's note (token; empty text removes it)",
            responses=WRITE_RESPONSES)
def put_trial_note(
    request: Request, name: Name, index: Index, body: Annotated[NoteBody, Body()],
    authorization: Annotated[str | None, Header()] = None, x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    exp = st.store.get_experiment(name)
    return serializers.note(store_manage.set_note(st.store, exp.id, body.text, index))


@router.post("/experiments/{name}/rename", summary="Rename the experiment (token; not while it is driven)",
             responses=MANAGE_RESPONSES)
def rename(
    request: Request, name: Name, body: Annotated[RenameBody, Body()],
    authorization: Annotated[str | None, Header()] = None, x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Its work directory stays where it is recorded; pages under the old name answer 404 afterwards."""
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    try:
        result = manage.rename(st.store, name, body.name)
    except (ExperimentBusyError, AlreadyExistsError) as e:
        raise ConflictError(e.message, e.hint) from None
    st.forget(name)
    return result


@router.delete("/experiments/{name}", summary="Delete the experiment and all its rows (token; not while it is driven)",
               responses=MANAGE_RESPONSES)
def delete(
    request: Request, name: Name,
    files: Annotated[bool, Query(description="also delete its recorded work directory")] = False,
    authorization: Annotated[str | None, Header()] = None, x_nasctl_token: Annotated[str | None, Header()] = None,
) -> dict[str, Any]:
    """Trials, metric values, events, device leases and notes go in one transaction; with `files=true`
    the recorded work directory too (never a folder another experiment records, never through a link)."""
    require_token(request, authorization, x_nasctl_token)
    st = state(request)
    try:
        result = manage.remove(st.store, name, files)
    except ExperimentBusyError as e:
        raise ConflictError(e.message, e.hint) from None
    st.forget(name)
    return result
