"""Blocking facades over the async client objects, for synchronous callers (Spark, scripts).

A `SyncFacade` owns one event loop running in a daemon thread; the wrapped object lives on that
loop, and each of its methods (coroutine or plain) runs there as a blocking call. Delivery
callbacks of a wrapped producer run on the loop thread.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

__all__ = ["EventLoopThread", "SyncFacade"]

T = TypeVar("T")


class EventLoopThread:
    """An asyncio loop in a daemon thread; `run(coro)` blocks until the coroutine finishes."""

    def __init__(self, name: str = "moldau-client") -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class SyncFacade(Generic[T]):
    """Wraps an async client object built by `factory` on a private loop."""

    def __init__(self, factory: Callable[[], T]) -> None:
        self._loop_thread = EventLoopThread()

        async def build() -> T:
            return factory()

        try:
            self._target = self._loop_thread.run(build())
        except BaseException:
            self._loop_thread.stop()
            raise

    @property
    def target(self) -> T:
        return self._target

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if inspect.iscoroutinefunction(attribute):

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop_thread.run(attribute(*args, **kwargs))

            return call
        if callable(attribute):
            # Plain methods touch state owned by the loop: run them there too.
            def call_on_loop(*args: Any, **kwargs: Any) -> Any:
                async def invoke() -> Any:
                    return attribute(*args, **kwargs)

                return self._loop_thread.run(invoke())

            return call_on_loop
        return attribute

    def close(self) -> None:
        closer = getattr(self._target, "close", None)
        try:
            if closer is not None and inspect.iscoroutinefunction(closer):
                self._loop_thread.run(closer())
        finally:
            self._loop_thread.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
