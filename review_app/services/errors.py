"""Errors that services raise; their messages are written for the person at the screen."""

from __future__ import annotations


class ServiceError(Exception):
    """Base class: something the user asked for cannot be done, with a reason they can act on."""


class NotFound(ServiceError):
    pass


class PermissionDenied(ServiceError):
    pass


class Conflict(ServiceError):
    """The data changed under the request (another window, another lead); reload and retry."""


class InvalidInput(ServiceError):
    pass


class AccountLocked(ServiceError):
    pass


class SessionEnded(PermissionDenied):
    """The acting account changed (deactivated, new password or role) since its session began: sign in again."""
