"""Folders holding only the published JSON files of every AnyFlow model (no weights), for `vidax run ... --dry-run`
and the random-checkpoint writer: the transformer configs the full-size test checks
(plugins/vidax_anyflow/tests/test_anyflow_full_size.py) with the Wan2.1 VAE and UMT5-XXL, filled in by diffusers on
the meta device (vidax_core.testing.config_folders). Needs the test extra.

    python plugins/vidax_anyflow/scripts/published_config_folders.py CONFIGS
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from test_anyflow_full_size import CLASSES, DITS, SCHEDULER_SHIFT  # noqa: E402

from vidax_core.testing.config_folders import write_wan_based  # noqa: E402

SCHED = {"_class_name": "FlowMapEulerDiscreteScheduler", "num_train_timesteps": 1000, "shift": SCHEDULER_SHIFT}
for mid, dit in DITS.items():
    pipeline = "AnyFlowFARPipeline" if "far" in mid else "AnyFlowPipeline"
    write_wan_based(os.path.join(sys.argv[1], mid), transformer=dit, transformer_class=CLASSES[mid],
                    pipeline=pipeline, scheduler=SCHED)
