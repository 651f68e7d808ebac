"""vidax: load a video diffusion model once, generate many videos (the Python face of ``vidax-core``).

    import vidax
    with vidax.load("configs/wan_demo.yaml") as pipe:
        pipe(prompt="a red fox", seed=1).save("out/fox.mp4")

See docs/python-api.md.
"""

from vidax_core import __version__
from vidax_core.api import CALL_ARGUMENTS, Output, Pipe, load
from vidax_core.errors import Cancelled, UserError

__all__ = ["load", "Pipe", "Output", "UserError", "Cancelled", "CALL_ARGUMENTS", "__version__"]
