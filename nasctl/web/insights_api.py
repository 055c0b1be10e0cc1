"""The analysis endpoints under /api: history, importance, contour, selection, compare.

Heavy results are cached per experiment by change cursor in
`nasctl.web.insights.InsightsCache` (kept on the app as `app.state.insights`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from nasctl.errors import BadInputError
from nasctl.web import insights
from nasctl.web.api import ErrorBody, Name
from nasctl.web.importance import contour as forest_contour

router = APIRouter(
    prefix="/api",
    responses={
        400: {"model": ErrorBody, "description": "bad input (malformed filter, unknown parameter or objective)"},
        404: {"model": ErrorBody, "description": "no such experiment"},
        503: {"model": ErrorBody, "description": "the database cannot be reached"},
    },
)

Where = Annotated[
    list[str] | None,
    Query(description="filters on metrics or parameters: `val_acc >= 0.9`, `width < 64`, `act = relu` (all must hold)"),
]


def cache(request: Request) -> insights.InsightsCache:
    return request.app.state.insights  # type: ignore[no-any-return]


@router.get("/experiments/{name}/history", summary="Each objective per completed trial, with its best so far")
def history(request: Request, name: Name) -> dict[str, Any]:
    """Values of completed trials by trial index and by time since the experiment started;
    `best` is the best feasible value so far (respecting each objective's goal), as steps."""
    return cache(request).derived(name, "history", insights.history)  # type: ignore[no-any-return]


def importance_json(m: Any, cursor: int) -> dict[str, Any]:
    """The `/importance` answer for importance model `m` (`stale` when the experiment is past its `cursor`)."""
    return {
        "method": "random-forest main effects (fANOVA-style first-order variance share)",
        "cursor": m.cursor,
        "stale": m.cursor != cursor,
        "trials_used": m.trials_used,
        "total_completed": m.total_completed,
        "parameters": [e.name for e in m.encodings],
        "scales": [{"name": e.name, "kind": e.kind, "log": e.log} for e in m.encodings],
        "objectives": {o: {"importance": m.importance[o], "share": m.share[o], "fitted": o in m.forests}
                       for o in m.importance},
    }


@router.get("/experiments/{name}/importance", summary="Parameter importance per objective")
def importance(request: Request, name: Name, wait: bool = False) -> dict[str, Any]:
    """Per objective and parameter: the share of a random forest's prediction variance
    that the parameter's main effect explains (`importance`), and the same rescaled to
    sum to one (`share`). After new results the previous model answers at once
    (`stale: true`) while a fresh one is fitted; `wait=true` waits for the fresh one."""
    c = cache(request)
    m = c.importance(name, wait=wait)
    return importance_json(m, c.analyses.get(name).cursor)


@router.get("/experiments/{name}/contour", summary="An objective over two parameters (the forest's partial dependence)")
def contour(
    request: Request,
    name: Name,
    x: Annotated[str, Query(max_length=200)],
    y: Annotated[str, Query(max_length=200)],
    objective: Annotated[str, Query(max_length=200)],
) -> dict[str, Any]:
    return contour_json(cache(request).importance(name), x, y, objective)


def contour_json(m: Any, x: str, y: str, objective: str) -> dict[str, Any]:
    """The `/contour` answer: `objective` over parameters `x` and `y` from importance model `m`.

    Raises:
        BadInputError: an unknown parameter or objective, the same parameter twice, too few values.
    """
    names = [e.name for e in m.encodings]
    for p in (x, y):
        if p not in names:
            raise BadInputError(f"no parameter {p!r} to plot", f"parameters: {', '.join(names)}")
    if x == y:
        raise BadInputError("the contour needs two different parameters", "choose another y")
    if objective not in m.importance:
        raise BadInputError(f"{objective!r} is not an objective", f"objectives: {', '.join(m.importance)}")
    if objective not in m.forests:
        raise BadInputError(f"too few completed trials with {objective!r} to model it", "wait for more results")
    return {"cursor": m.cursor, **forest_contour(m, x, y, objective)}


@router.get("/experiments/{name}/selection", summary="Indices of the trials that pass the filters")
def selection(request: Request, name: Name, where: Where = None) -> dict[str, Any]:
    """The same filters as the trial table's `where`, over every trial (for highlighting)."""
    c = cache(request)
    a, entry = c.get(name)
    chosen = insights.select_indices(a, entry.columns, insights.parse_filters(a, where or []))
    return {"cursor": a.cursor, "total": len(chosen), "index": chosen}


@router.get(
    "/experiments/{name}/selection.csv",
    summary="The trials that pass the filters, as CSV",
    response_class=Response,
    responses={200: {"content": {"text/csv": {"schema": {"type": "string"}}}, "description": "CSV"}},
)
def selection_csv(request: Request, name: Name, where: Where = None) -> Response:
    c = cache(request)
    a, entry = c.get(name)
    chosen = insights.select_indices(a, entry.columns, insights.parse_filters(a, where or []))
    body = insights.selection_csv(a, entry.columns, chosen)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in a.experiment.name)
    return Response(body, media_type="text/csv",
                    headers={"Content-Disposition": f'attachment; filename="{safe}-selection.csv"'})


@router.get("/compare", summary="Hypervolume histories and fronts of experiments with the same objectives")
def compare(
    request: Request,
    names: Annotated[list[str], Query(min_length=2, max_length=12, description="two or more experiment names")],
) -> dict[str, Any]:
    """All against one common reference point (see `insights.compare`)."""
    return cache(request).compare(names)
