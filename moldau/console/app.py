"""The console's pages as a Starlette (ASGI) application: server-rendered Jinja2 templates, with
htmx refreshing each page's live part (`#live`) every few seconds.

Routes are thin: they validate what the user gave (`validation.py`), ask the backend (the
cluster, through `moldau.client`), and render a template. A request htmx sends for a live
part (header `HX-Request`) gets only that part (`<page>_live.html`). Reads are GETs; every
change is a POST that must pass the cross-site checks of `security.py`, and a successful one
redirects to the page showing its result (`?notice=`). A failure is shown in the page with its
HTTP status (`problems.py`), the form keeping what the user typed.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import jinja2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from moldau.client.admin import GroupListing
from moldau.client.errors import KafkaException
from moldau.console import validation
from moldau.console.model import (
    BrowseRequest,
    BrowseResult,
    GroupDetail,
    Overview,
    Produced,
    ProduceRequest,
    ResetRequest,
    TopicDetail,
    TopicsView,
)
from moldau.console.problems import Problem, ProblemKind, problem_of
from moldau.console.rendering import RecordFormat
from moldau.console.security import (
    CSRF_FIELD,
    CsrfToken,
    SecurityHeaders,
    cross_site_problem,
)
from moldau.console.validation import InvalidInput, OffsetTarget
from moldau.types import TopicPartition

__all__ = ["MAX_FORM_BYTES", "ConsoleBackend", "build_app"]

log = logging.getLogger(__name__)

MAX_FORM_BYTES: Final = 2 * validation.MAX_VALUE_BYTES  # a test message's value, form-encoded
_FORM_TYPE: Final = "application/x-www-form-urlencoded"
_NOTICES: Final = {
    "created": "Topic created.",
    "config-set": "Config set.",
    "produced": "Message produced.",
    "reset": "Offsets reset.",
}
_START_KINDS: Final = ("earliest", "latest", "offset", "timestamp")


class ConsoleBackend(Protocol):
    """What the routes ask of the cluster (`backend.ClusterConsole`)."""

    async def overview(self) -> Overview: ...

    async def topics(self) -> TopicsView: ...

    async def topic(self, name: str) -> TopicDetail: ...

    async def create_topic(
        self,
        *,
        name: str,
        partitions: int | None,
        replication_factor: int | None,
        configs: Mapping[str, str],
    ) -> None: ...

    async def set_topic_config(self, topic: str, name: str, value: str) -> None: ...

    async def browse(self, request: BrowseRequest) -> BrowseResult: ...

    async def produce(self, request: ProduceRequest) -> Produced: ...

    async def groups(self) -> list[GroupListing]: ...

    async def group(self, group_id: str) -> GroupDetail: ...

    async def reset_offsets(self, request: ResetRequest) -> dict[TopicPartition, int]: ...


class Refused(Exception):
    """A request the console will not act on at all (cross-site, malformed form)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- templates ---------------------------------------------------------------------------------


def _size(value: int | None) -> str:
    if value is None:
        return "—"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{int(amount)} B" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{value} B"  # (not reached)


def _time(milliseconds: int | None) -> str:
    if milliseconds is None or milliseconds < 0:
        return "—"
    moment = datetime.fromtimestamp(milliseconds / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{milliseconds % 1000:03d} UTC"


def _path(value: str) -> str:
    """A topic or group id as one URL path segment."""
    return urllib.parse.quote(value, safe="")


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("moldau.console", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["size"] = _size
    env.filters["time"] = _time
    env.filters["path"] = _path
    return env


# --- forms -------------------------------------------------------------------------------------


async def read_form(request: Request, csrf: CsrfToken) -> dict[str, str]:
    """The fields of a POSTed form from the console's own pages (the first of repeated names);
    `Refused` for anything else."""
    problem = cross_site_problem(
        request.headers, [f"{request.url.scheme}://{request.headers.get('host', '')}"]
    )
    if problem is not None:
        raise Refused(403, problem)
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != _FORM_TYPE:
        raise Refused(415, f"a form must be sent as {_FORM_TYPE}")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise Refused(413, f"a form may have at most {MAX_FORM_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise Refused(413, f"a form may have at most {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
    try:
        text = b"".join(chunks).decode("utf-8")
        pairs = urllib.parse.parse_qsl(
            text, keep_blank_values=True, max_num_fields=64, errors="strict"
        )
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "the form is not valid UTF-8 form data") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        fields.setdefault(name, value)
    if not csrf.matches(fields.get(CSRF_FIELD)):
        raise Refused(403, "the form's CSRF token is missing or stale: reload the page")
    return fields


def _start_of(values: Mapping[str, str]) -> OffsetTarget:
    """Where to start reading or resetting: `from` (earliest, latest, offset, timestamp) with
    the `offset` or `timestamp` it needs."""
    kind = (values.get("from") or "earliest").strip().lower()
    if kind not in _START_KINDS:
        raise InvalidInput("from", f"from must be one of {', '.join(_START_KINDS)}")
    if kind == "offset":
        return OffsetTarget(kind, validation.offset(values.get("offset")))
    if kind == "timestamp":
        return OffsetTarget(kind, validation.timestamp_ms(values.get("timestamp")))
    return OffsetTarget(kind)


def _record_format(raw: str | None) -> RecordFormat:
    try:
        return RecordFormat((raw or "auto").strip().lower())
    except ValueError:
        raise InvalidInput("format", "format must be auto, text, json or hex") from None


def _optional_count(raw: str | None, parse: Callable[[str | None], int]) -> int | None:
    return None if raw is None or not raw.strip() else parse(raw)


# --- the application ---------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def build_app(
    backend: ConsoleBackend,
    *,
    csrf: CsrfToken,
    allowed_hosts: list[str],
    refresh_seconds: float = 2.0,
) -> Starlette:
    templates = Jinja2Templates(env=environment())

    def respond(
        request: Request,
        name: str,
        *,
        status: int = 200,
        problem: Problem | None = None,
        form: Mapping[str, str] | None = None,
        **context: Any,
    ) -> Response:
        notice = _NOTICES.get(request.query_params.get("notice", ""))
        query = request.url.query
        return templates.TemplateResponse(
            request,
            name,
            {
                "csrf_field": CSRF_FIELD,
                "csrf_token": csrf.value,
                "refresh_ms": int(refresh_seconds * 1000),
                "live_url": request.url.path + (f"?{query}" if query else ""),
                "problem": problem,
                "notice": None if problem else notice,
                "form": form or {},
                **context,
            },
            status_code=status,
        )

    def render(request: Request, template: str, **arguments: Any) -> Response:
        """The page, or only its live part when htmx asks for it."""
        if request.headers.get("hx-request") == "true":
            template = template.replace(".html", "_live.html")
        return respond(request, template, **arguments)

    def failure(request: Request, problem: Problem) -> Response:
        if request.headers.get("hx-request") == "true":
            # (htmx swaps only 2xx answers: the live part says what went wrong and polls on)
            return respond(request, "live_error.html", problem=problem)
        return respond(request, "error.html", status=problem.status, problem=problem)

    def guarded(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except Refused as refused:
                problem = Problem(ProblemKind.input, "Refused", refused.message, refused.status)
                return respond(request, "error.html", status=refused.status, problem=problem)
            except (InvalidInput, KafkaException, TimeoutError) as error:
                return failure(request, problem_of(error))
            except Exception as error:
                log.exception("console: %s %s failed", request.method, request.url.path)
                return failure(request, problem_of(error))

        return endpoint

    def redirect(path: str, **query: Any) -> Response:
        return RedirectResponse(f"{path}?{urllib.parse.urlencode(query)}", status_code=303)

    # --- cluster -------------------------------------------------------------------------

    async def overview(request: Request) -> Response:
        return render(request, "overview.html", overview=await backend.overview())

    # --- topics --------------------------------------------------------------------------

    async def topics_page(
        request: Request, *, problem: Problem | None = None, form: Mapping[str, str] | None = None
    ) -> Response:
        status = problem.status if problem else 200
        view = await backend.topics()
        return render(request, "topics.html", status=status, problem=problem, form=form, view=view)

    async def topics(request: Request) -> Response:
        return await topics_page(request)

    async def create_topic(request: Request) -> Response:
        form = await read_form(request, csrf)
        try:
            name = validation.topic_name(form.get("topic"))
            partitions = _optional_count(form.get("partitions"), validation.partition_count)
            factor = _optional_count(form.get("replication_factor"), validation.replication_factor)
            configs = validation.topic_configs(form.get("configs"))
            await backend.create_topic(
                name=name, partitions=partitions, replication_factor=factor, configs=configs
            )
        except (InvalidInput, KafkaException, TimeoutError) as error:
            return await topics_page(request, problem=problem_of(error), form=form)
        return redirect(f"/topics/{_path(name)}", notice="created")

    async def topic_page(
        request: Request,
        name: str,
        *,
        problem: Problem | None = None,
        form: Mapping[str, str] | None = None,
    ) -> Response:
        detail = await backend.topic(name)
        status = problem.status if problem else 200
        return render(
            request, "topic.html", status=status, problem=problem, form=form, topic=detail
        )

    def topic_of(request: Request) -> str:
        return validation.topic_name(request.path_params["topic"])

    async def topic(request: Request) -> Response:
        return await topic_page(request, topic_of(request))

    async def set_topic_config(request: Request) -> Response:
        name = topic_of(request)
        form = await read_form(request, csrf)
        try:
            key, value = validation.topic_config(form.get("name", ""), form.get("value", ""))
            await backend.set_topic_config(name, key, value)
        except (InvalidInput, KafkaException, TimeoutError) as error:
            return await topic_page(request, name, problem=problem_of(error), form=form)
        return redirect(f"/topics/{_path(name)}", notice="config-set")

    # --- messages ------------------------------------------------------------------------

    async def messages(request: Request) -> Response:
        name = topic_of(request)
        query = request.query_params
        try:
            browse_request = BrowseRequest(
                topic=name,
                partition=validation.partition(query.get("partition") or "0"),
                start=_start_of(query),
                limit=validation.browse_limit(query.get("limit")),
                format=_record_format(query.get("format")),
            )
        except InvalidInput as error:
            problem = problem_of(error)
            return render(
                request,
                "messages.html",
                status=problem.status,
                problem=problem,
                form=dict(query),
                topic_name=name,
                result=None,
            )
        result = await backend.browse(browse_request)
        return render(request, "messages.html", form=dict(query), topic_name=name, result=result)

    async def produce(request: Request) -> Response:
        name = topic_of(request)
        form = await read_form(request, csrf)
        try:
            value = form.get("value", "").encode()
            key = form.get("key", "").encode()
            if len(value) > validation.MAX_VALUE_BYTES:
                raise InvalidInput(
                    "value", f"a value has at most {validation.MAX_VALUE_BYTES} bytes"
                )
            if len(key) > validation.MAX_KEY_BYTES:
                raise InvalidInput("key", f"a key has at most {validation.MAX_KEY_BYTES} bytes")
            produced = await backend.produce(
                ProduceRequest(
                    topic=name,
                    partition=validation.optional_partition(form.get("partition")),
                    key=key or None,
                    value=value,
                    headers=tuple(validation.headers(form.get("headers"))),
                )
            )
        except (InvalidInput, KafkaException, TimeoutError) as error:
            return await topic_page(request, name, problem=problem_of(error), form=form)
        return redirect(
            f"/topics/{_path(name)}/messages",
            partition=produced.partition,
            **{"from": "offset"},
            offset=produced.offset,
            notice="produced",
        )

    # --- groups --------------------------------------------------------------------------

    async def groups(request: Request) -> Response:
        return render(request, "groups.html", groups=await backend.groups())

    def group_of(request: Request) -> str:
        return validation.group_id(request.path_params["group_id"])

    async def group_page(
        request: Request,
        group_id: str,
        *,
        problem: Problem | None = None,
        form: Mapping[str, str] | None = None,
    ) -> Response:
        detail = await backend.group(group_id)
        status = problem.status if problem else 200
        return render(
            request, "group.html", status=status, problem=problem, form=form, group=detail
        )

    async def group(request: Request) -> Response:
        return await group_page(request, group_of(request))

    async def reset_offsets(request: Request) -> Response:
        group_id = group_of(request)
        form = await read_form(request, csrf)
        try:
            reset = ResetRequest(
                group_id=group_id,
                topic=validation.topic_name(form.get("topic")),
                partition=validation.optional_partition(form.get("partition")),
                target=_start_of(form),
            )
            await backend.reset_offsets(reset)
        except (InvalidInput, KafkaException, TimeoutError) as error:
            return await group_page(request, group_id, problem=problem_of(error), form=form)
        return redirect(f"/groups/{_path(group_id)}", notice="reset")

    async def not_found(request: Request) -> Response:
        problem = Problem(ProblemKind.input, "Not found", "there is no such page", 404)
        return respond(request, "error.html", status=404, problem=problem)

    routes = [
        Route("/", guarded(overview), name="overview"),
        Route("/topics", guarded(topics), name="topics"),
        Route("/topics", guarded(create_topic), methods=["POST"]),
        Route("/topics/{topic}", guarded(topic), name="topic"),
        Route("/topics/{topic}/configs", guarded(set_topic_config), methods=["POST"]),
        Route("/topics/{topic}/messages", guarded(messages), name="messages"),
        Route("/topics/{topic}/messages", guarded(produce), methods=["POST"]),
        Route("/groups", guarded(groups), name="groups"),
        Route("/groups/{group_id:path}", guarded(group), name="group"),
        Route("/groups/{group_id:path}", guarded(reset_offsets), methods=["POST"]),
        Mount("/static", StaticFiles(packages=[("moldau.console", "static")]), name="static"),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        if status == 404:
            return await not_found(request)
        problem = Problem(ProblemKind.input, "Refused", str(getattr(exc, "detail", "")), status)
        return respond(request, "error.html", status=status, problem=problem)

    return Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts),
        ],
        exception_handlers={404: http_error, 405: http_error},
    )
