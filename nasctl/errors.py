"""Typed errors. Every error carries a message (what was wrong) and a hint (what to do)."""

from __future__ import annotations


class NasctlError(Exception):
    """Root of all nasctl errors.

    Attributes:
        message: what went wrong, naming the input that was given.
        hint: what the user should do about it (often a command).
        exit_code: 2 for bad usage or bad input, 1 for failures at run time.
    """

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class BadInputError(NasctlError):
    """Input that can never work as given (exit code 2)."""

    exit_code = 2


class SpecError(BadInputError):
    """The experiment spec is malformed or inconsistent."""


class NotFoundError(BadInputError):
    """A named experiment or trial does not exist in the database."""


class AlreadyExistsError(BadInputError):
    """An experiment with the same name already exists."""


class SchemaOutdatedError(BadInputError):
    """The database schema is older (or newer) than this nasctl expects."""


class StorageError(NasctlError):
    """The database could not be reached or refused an operation."""


class RunnerError(NasctlError):
    """A job could not be submitted, polled or cancelled."""


class SchedulerUnreachable(RunnerError):
    """The scheduler (or its accounting) did not answer: a wait, not a failure.

    Raised by a runner's `status`, `submit` and `find` when the cluster's control
    plane cannot be reached (Slurm: neither `sacct` nor `squeue` answers, or `sbatch`
    cannot contact the controller; Kubernetes: the API server does not answer).
    The loop keeps its trials running and its candidates queued, and retries."""


class UnknownRunnerError(BadInputError):
    """The spec names a scheduler nasctl has no runner for."""


class MetricsError(NasctlError):
    """A TensorBoard log could not be read."""


class LeaseError(NasctlError):
    """Another orchestrator (or the service) holds the experiment, or another service the database."""

    exit_code = 2


class DatasetError(BadInputError):
    """A trainer's dataset is unknown, missing or corrupt."""


class TrialSetupError(BadInputError):
    """A trial cannot start as configured (precision on this device, a user model that cannot be built)."""


class UnsupportedVersionError(NasctlError):
    """An installed library (Ax, BoTorch) is a release nasctl does not support."""


class ExperimentBusyError(BadInputError):
    """The experiment is running or queued (some process drives it): it cannot be renamed or removed now."""


class ConflictError(BadInputError):
    """The request is valid but the experiment or trial is not in a state that allows it
    (a trial that has already ended cancelled; HTTP 409)."""
