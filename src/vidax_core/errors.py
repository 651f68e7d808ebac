"""Errors a user can cause and fix: the CLI prints them as one ``error:`` line and exits with code 2."""


class UserError(ValueError):
    """A problem with the user's input (config, checkpoint, files); the message says what and how to fix it.

    A ValueError, so library callers that catch ValueError keep working.
    """


class Cancelled(Exception):
    """A generation stopped between steps because its caller asked (the server's DELETE, a cancel event)."""


class PluginError(RuntimeError):
    """A family plugin's own hook failed with an error that is not a :class:`UserError` (a bug in the plugin, or in
    what it called): the message names the plugin's distribution and the hook, ``error in plugin vidax-x, hook
    check_run: TypeError: ...``, so the CLI blames the plugin rather than vidax. The original exception is its
    ``__cause__``."""

    def __init__(self, plugin: str, hook: str, exc: BaseException) -> None:
        first = (str(exc).splitlines() or [""])[0][:300]
        super().__init__(f"error in plugin {plugin}, hook {hook}: {type(exc).__name__}: {first}")
        self.plugin, self.hook = plugin, hook
