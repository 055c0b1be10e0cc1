"""`create_app(store)`: the dashboard as a FastAPI app (JSON API, pages, static files).

The app is a client of the store, queries and orchestration functions: it
never writes SQL of its own and never launches or cancels jobs itself (stop and
cancel are recorded as requests the orchestrator honours).

Security defaults: read-only unless a token is given; pages insert user
strings as text only and a Content-Security-Policy allows scripts from this
origin only; `allowed_hosts` (set by `nasctl web` when bound to loopback)
refuses requests whose Host header names another host (DNS rebinding).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from nasctl import __version__
from nasctl.errors import BadInputError, ConflictError, NasctlError, NotFoundError, StorageError
from nasctl.store import Store
from nasctl.web import api, insights_api, manage_api
from nasctl.web.insights import InsightsCache
from nasctl.web.pages import PAGES, STATIC, not_found_html, page_html

log = logging.getLogger("nasctl.web")

#: What /static/NAME serves, by suffix (the shell and page bodies are not served: the pages are).
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}

# Scripts: plotly.min.js and the pages' ES modules, all from /static ('self' covers module scripts
# and their imports); 'unsafe-eval' is plotly's (it compiles functions for some trace types).
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


def swagger_ui_path(filename: str) -> Path:
    """A Swagger UI asset (swagger-ui-bundle.js, swagger-ui.css) from the installed
    fastapi-offline package, so /docs works without internet.

    Raises:
        NotFoundError: fastapi-offline is not installed or lacks the file.
    """
    try:
        folder = Path(str(files("fastapi_offline").joinpath("static")))
    except ModuleNotFoundError:
        raise NotFoundError("the fastapi-offline package is not installed", "pip install fastapi-offline") from None
    path = folder / filename
    if not path.is_file():
        raise NotFoundError(f"{path} is missing from the fastapi-offline package", "reinstall fastapi-offline")
    return path


def plotly_js_path() -> Path:
    """plotly.min.js from the installed plotly package (the dashboard works offline).

    Raises:
        NotFoundError: the plotly package is not installed or ships no plotly.min.js.
    """
    try:
        import plotly
    except ImportError:
        raise NotFoundError("the plotly package is not installed", "pip install plotly") from None
    path = Path(os.path.dirname(plotly.__file__), "package_data", "plotly.min.js")
    if not path.is_file():
        raise NotFoundError(f"{path} is missing from the plotly package", "reinstall plotly")
    return path


def _status_of(e: NasctlError) -> int:
    if isinstance(e, api.AuthError):
        return e.status_code
    if isinstance(e, ConflictError):
        return 409
    if isinstance(e, NotFoundError):
        return 404
    if isinstance(e, BadInputError):
        return 400
    if isinstance(e, StorageError):
        return 503
    return 500


def _error(status: int, message: str, hint: str | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "hint": hint}, status_code=status)


WriteRefusal = Callable[[], tuple[str, str | None] | None]
"""Says whether writes are refused now: None when they are allowed, else (message, hint)."""

READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def create_app(store: Store, *, token: str | None = None, allowed_hosts: Sequence[str] | None = None,
               refuse_writes: WriteRefusal | None = None) -> FastAPI:
    """The dashboard for the experiments in `store`.

    Args:
        store: the database to show.
        token: when given, `POST /api/.../stop` and `.../cancel` require it;
            without it the dashboard is read-only (writes answer 403).
        allowed_hosts: Host header values to accept (None: any).
        refuse_writes: asked before every request that is not a read (any method but
            GET, HEAD, OPTIONS); when it answers (message, hint), the request is
            answered 503 with them (a standby `nasctl serve` names the active one).
    """
    app = FastAPI(
        title="nasctl dashboard",
        version=__version__,
        description="Experiments, Pareto fronts, trials and model diagnostics of a nasctl database.",
        docs_url=None,  # FastAPI's own pages load Swagger UI from a CDN: /docs is served from the package below
        redoc_url=None,
    )
    app.state.nasctl = api.WebState(store, token or None)
    if refuse_writes is not None:  # innermost: after the Host check, under the security headers
        _add_write_refusal(app, refuse_writes)
    app.add_middleware(GZipMiddleware, minimum_size=2048, compresslevel=1)  # fast: the points of 100k trials are MBs
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "no-referrer"
        if request.url.path.startswith("/api/"):
            response.headers["Cache-Control"] = "no-store"
        return response

    _add_error_handlers(app)
    app.include_router(api.router)
    app.include_router(manage_api.router)
    app.state.insights = InsightsCache(store, app.state.nasctl.cache)
    app.include_router(insights_api.router)

    _add_pages(app)
    return app


def _add_write_refusal(app: FastAPI, refuse_writes: WriteRefusal) -> None:
    @app.middleware("http")
    async def refuse(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        refusal = None if request.method in READ_METHODS else refuse_writes()
        if refusal is None:
            return await call_next(request)
        response = _error(503, *refusal)
        response.headers["Retry-After"] = "5"
        return response


def _add_error_handlers(app: FastAPI) -> None:
    """Errors as JSON: nasctl's by meaning, the framework's and validation's in our
    shape, anything else a logged 500."""
    @app.exception_handler(NasctlError)
    async def nasctl_error(_request: Request, e: NasctlError) -> JSONResponse:
        status = _status_of(e)
        if status >= 500:
            log.error("request failed: %s", e)
        return _error(status, e.message, e.hint)

    @app.exception_handler(HTTPException)  # Starlette's: the framework's own (unparsable body, no route, 405)
    async def http_error(_request: Request, e: HTTPException) -> JSONResponse:
        hint = 'send a JSON object such as {"reason": "..."}, or no body' if e.status_code == 400 else None
        response = _error(e.status_code, str(e.detail), hint)
        response.headers.update(e.headers or {})
        return response

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, e: RequestValidationError) -> JSONResponse:
        """422 in the shape the OpenAPI schema declares (`detail`: loc, msg, type), plus
        our `error` and `hint`; a body that is not JSON at all is bad input (400)."""
        errors = e.errors()
        bad_json = next((x for x in errors if x.get("type") == "json_invalid"), None)
        if bad_json is not None:
            why = (bad_json.get("ctx") or {}).get("error") or bad_json.get("msg", "")
            return _error(400, f"the request body is not valid JSON ({why})",
                          'send a JSON object such as {"reason": "..."}, or no body')
        first = errors[0] if errors else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return JSONResponse(
            {"error": f"invalid request: {where}: {first.get('msg', 'invalid')}", "hint": "see /docs",
             "detail": [{"loc": list(map(str, x.get("loc", ()))), "msg": str(x.get("msg")),
                         "type": str(x.get("type", "value_error"))} for x in errors]},
            status_code=422,
        )

    @app.exception_handler(Exception)
    async def internal_error(request: Request, e: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, f"internal error: {type(e).__name__}", "see the server log")


def _add_pages(app: FastAPI) -> None:
    """The static files and the HTML pages (the pages fetch their data from /api)."""
    plotly_js = plotly_js_path()

    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_static() -> FileResponse:
        return FileResponse(plotly_js, media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    @app.get("/static/swagger/{filename}", include_in_schema=False)
    def swagger_static(filename: str) -> FileResponse:
        kinds = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}
        if filename not in kinds:
            raise NotFoundError(f"no static file {filename!r}")
        return FileResponse(swagger_ui_path(filename), media_type=kinds[filename],
                            headers={"Cache-Control": "max-age=86400"})

    @app.get("/docs", include_in_schema=False)
    def docs_page() -> FileResponse:
        return FileResponse(STATIC / "docs.html", media_type="text/html")

    served = {p.name: STATIC_TYPES[p.suffix] for p in STATIC.iterdir() if p.suffix in STATIC_TYPES and p.is_file()}

    @app.get("/static/{filename}", include_in_schema=False)
    def static(filename: str) -> FileResponse:
        if filename not in served:
            raise NotFoundError(f"no static file {filename!r}")
        return FileResponse(STATIC / filename, media_type=served[filename])

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> FileResponse:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

    pages = {kind: page_html(kind) for kind in PAGES}

    def page(kind: str) -> HTMLResponse:
        return HTMLResponse(pages[kind])

    def found(request: Request, kind: str, name: str, index: str | None = None) -> Response:
        """The page, or a plain 404 page when its experiment or trial does not exist."""
        store = api.state(request).store
        try:
            exp = store.get_experiment(name)
        except NotFoundError as e:
            return not_found_page(e.message, "/")
        if index is not None:
            try:
                if not index.isdigit() or len(index) > 10:
                    raise NotFoundError(f"no trial {index!r}: trials are numbered 0, 1, 2, ...")
                store.get_trial(exp.id, int(index))
            except NotFoundError as e:
                return not_found_page(f"{e.message} {name!r}", "/experiments/" + name)
        return page(kind)

    @app.get("/", include_in_schema=False)
    def experiments_page() -> HTMLResponse:
        return page("experiments")

    @app.get("/compare", include_in_schema=False)
    def compare_page() -> HTMLResponse:
        return page("compare")

    @app.get("/experiments/{name}", include_in_schema=False)
    def experiment_page(request: Request, name: str) -> Response:
        return found(request, "experiment", name)

    @app.get("/experiments/{name}/diagnostics", include_in_schema=False)
    def diagnostics_page(request: Request, name: str) -> Response:
        return found(request, "diagnostics", name)

    @app.get("/experiments/{name}/trials/{index}", include_in_schema=False)
    def trial_page(request: Request, name: str, index: str) -> Response:
        return found(request, "trial", name, index)


def not_found_page(message: str, back: str) -> HTMLResponse:
    """A plain 404 page: what was not found and a link back (the message is escaped)."""
    return HTMLResponse(not_found_html(message, back), status_code=404)
