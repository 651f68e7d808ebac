"""Errors a user can cause and fix: the CLI prints them as one ``error:`` line and exits with code 2."""


class UserError(ValueError):
    """A problem with the user's input (config, checkpoint, files); the message says what and how to fix it.

    A ValueError, so library callers that catch ValueError keep working.
    """


class Cancelled(Exception):
    """A generation stopped between steps because its caller asked (the server's DELETE, a cancel event)."""
