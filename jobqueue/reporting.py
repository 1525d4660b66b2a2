"""Final failures, and each outage once, go to Sentry when SENTRY_DSN is set; nothing is sent otherwise."""

import sentry_sdk
from sentry_sdk.integrations.atexit import AtexitIntegration
from sentry_sdk.integrations.dedupe import DedupeIntegration
from sentry_sdk.integrations.excepthook import ExcepthookIntegration

from jobqueue.logfmt import scrub_event


def init_sentry(dsn: str) -> bool:
    if not dsn:
        return False
    sentry_sdk.init(
        dsn=dsn,
        send_default_pii=False,
        # Only what report_final_failure sends: the logging integration would
        # turn every error line into a second event.
        default_integrations=False,
        integrations=[AtexitIntegration(), DedupeIntegration(), ExcepthookIntegration()],
        before_send=scrub_event,
    )
    return True


def report_final_failure(error: BaseException | str, *, job: str | None, context: dict) -> None:
    if not sentry_sdk.is_initialized():
        return
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("job", job or "unparsed")
        scope.set_tag("msg_id", context.get("msg_id"))
        scope.set_context("job", context)
        if isinstance(error, BaseException):
            sentry_sdk.capture_exception(error)
        else:
            sentry_sdk.capture_message(error, level="error")


def report_outage(error: BaseException, *, dependency: str, context: dict) -> None:
    """One event per outage (jobqueue/outage.py), not one per message that met it."""
    if not sentry_sdk.is_initialized():
        return
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("outage", dependency)
        scope.set_context("outage", context)
        sentry_sdk.capture_exception(error)


def flush() -> None:
    if sentry_sdk.is_initialized():
        sentry_sdk.flush(timeout=5)
