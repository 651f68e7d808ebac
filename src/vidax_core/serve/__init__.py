"""``vidax serve``: one loaded pipe behind an HTTP server speaking the OpenAI videos API, plus a browser page.

Modules: :mod:`.limits` (the settings a request is held to), :mod:`.request` (parsing and validating a create
request), :mod:`.multipart` (form-data bodies as the OpenAI SDK sends them), :mod:`.jobs` (the FIFO queue and the
one worker thread that calls the pipe), :mod:`.handler` (routes and HTTP framing), :mod:`.page` (the page at
``/``), :mod:`.multihost` (every process runs the steps under ``jax.distributed``), :mod:`.app` (wiring),
:mod:`.command` (the ``vidax serve`` subcommand).
"""

from vidax_core.serve.app import Server
from vidax_core.serve.limits import Limits

__all__ = ["Server", "Limits"]
