"""The root of every error whose message is written for the person at the screen.

It sits below all layers: the data layer raises ``DatabaseUnavailable`` (a database fault in one
sentence), the services raise their own subclasses, and the app's pages and the command line's
one error handler catch both with ``except ServiceError``.
"""

from __future__ import annotations


class ServiceError(Exception):
    """Something the user asked for cannot be done, with a reason they can act on."""
