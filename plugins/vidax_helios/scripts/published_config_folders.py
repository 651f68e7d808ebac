"""Folders holding only the published JSON files of every Helios model (no weights), for `vidax run ... --dry-run`
and the random-checkpoint writer: the transformer config the full-size test checks
(plugins/vidax_helios/tests/test_helios_full_size.py), the scheduler config and pipeline of each id
(vidax_helios.presets.SCHEDULERS / PIPELINES) with the Wan2.1 VAE and UMT5-XXL, filled in by diffusers on
the meta device (vidax_core.testing.config_folders). Needs the test extra.

    python plugins/vidax_helios/scripts/published_config_folders.py CONFIGS
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from test_helios_full_size import DITS  # noqa: E402

from vidax_core.testing.config_folders import write_wan_based  # noqa: E402
from vidax_helios.presets import PIPELINES, SCHEDULERS  # noqa: E402

for mid, dit in DITS.items():
    flags = {k: v for k, v in PIPELINES[mid].items() if k != "_class_name"}
    write_wan_based(os.path.join(sys.argv[1], mid), transformer=dit, transformer_class="HeliosTransformer3DModel",
                    pipeline=PIPELINES[mid]["_class_name"], scheduler=SCHEDULERS[mid], pipeline_config=flags)
