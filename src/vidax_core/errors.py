"""Errors a user can cause and fix: the CLI prints them as one ``error:`` line and exits with code 2."""


class UserError(Exception):
    """A problem with the user's input (config, checkpoint, files); the message says what and how to fix it."""
