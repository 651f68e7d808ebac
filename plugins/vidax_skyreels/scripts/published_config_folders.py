"""Folders holding only the published JSON files of every SkyReels-V2 model (no weights), for `vidax run ...
--dry-run` and the random-checkpoint writer: the transformer configs the full-size test checks
(plugins/vidax_skyreels/tests/test_skyreels_full_size.py) with the Wan2.1 VAE and UMT5-XXL (and the CLIP ViT-H image
tower for image-to-video), filled in by diffusers on the meta device (vidax_core.testing.config_folders).
Needs the test extra.

    python plugins/vidax_skyreels/scripts/published_config_folders.py CONFIGS
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from test_skyreels_full_size import DITS, SCHEDULER_SHIFT  # noqa: E402

from vidax_core.testing.config_folders import write_wan_based  # noqa: E402

SCHED = {"_class_name": "UniPCMultistepScheduler", "num_train_timesteps": 1000, "prediction_type": "flow_prediction",
         "use_flow_sigmas": True, "flow_shift": SCHEDULER_SHIFT, "solver_order": 2}
PIPELINES = {"df": "SkyReelsV2DiffusionForcingPipeline", "t2v": "SkyReelsV2Pipeline",
             "i2v": "SkyReelsV2ImageToVideoPipeline"}
for mid, dit in DITS.items():
    kind = mid.split("-")[2]
    write_wan_based(os.path.join(sys.argv[1], mid), transformer=dit, transformer_class="SkyReelsV2Transformer3DModel",
                    pipeline=PIPELINES[kind], scheduler=SCHED,
                    image_encoder="CLIPVisionModelWithProjection" if kind == "i2v" else None)
