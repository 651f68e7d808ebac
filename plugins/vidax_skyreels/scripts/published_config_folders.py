"""Folders holding only the published JSON files of every SkyReels-V2 model (no weights), for `vidax run ...
--dry-run` and the random-checkpoint writer: the transformer configs the full-size test checks
(plugins/vidax_skyreels/tests/test_skyreels_full_size.py) with the Wan2.1 VAE and UMT5-XXL, filled in by diffusers
on the meta device (vidax_core.testing.config_folders). Needs the test extra.

    python plugins/vidax_skyreels/scripts/published_config_folders.py CONFIGS
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from test_skyreels_full_size import DITS, SCHEDULER_SHIFT  # noqa: E402

from vidax_core.testing.config_folders import write_wan_based  # noqa: E402

SCHED = {"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
         "use_flow_sigmas": True, "flow_shift": SCHEDULER_SHIFT, "solver_order": 2}
for mid, dit in DITS.items():
    write_wan_based(os.path.join(sys.argv[1], mid), transformer=dit, transformer_class="SkyReelsV2Transformer3DModel",
                    pipeline="SkyReelsV2DiffusionForcingPipeline" if "-df-" in mid else "SkyReelsV2Pipeline",
                    scheduler=SCHED)
