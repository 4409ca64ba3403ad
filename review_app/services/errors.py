"""Errors that services raise; their messages are written for the person at the screen."""

from __future__ import annotations

# The root class lives below every layer, so database faults (review_app.db.errors) are ServiceErrors too.
from review_app.errors import ServiceError as ServiceError


class NotFound(ServiceError):
    pass


class PermissionDenied(ServiceError):
    pass


class Conflict(ServiceError):
    """The data changed under the request (another window, another lead); reload and retry."""


class ScoresDiffer(Conflict):
    """A submit whose score vector is not the one saved in the draft: the screen and the server disagree."""


class InvalidInput(ServiceError):
    pass


class AccountLocked(ServiceError):
    pass


class SessionEnded(PermissionDenied):
    """The acting account changed (deactivated, new password or role) since its session began: sign in again."""
