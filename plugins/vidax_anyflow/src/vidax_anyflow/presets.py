"""Model ids of the AnyFlow family (NVIDIA's ``nvidia/anyflow`` collection), their recipes and options.

Recipes from the model cards and the diffusers pipelines' call defaults: 480x832, 81 frames at 16 fps, 4 flow-map
steps (any step count works: the models are distilled for any-step sampling), guidance 1.0 (classifier-free
guidance is folded into the weights), 512 text tokens.
"""

from __future__ import annotations

from vidax_core import Option

#: AnyFlowFARPipeline's call arguments vidax takes (diffusers names and defaults), and the cache's window.
FAR_OPTIONS = {
    "chunk_partition": Option(None, list[int] | None, "latent frames of each chunk, first to last (they must add up "
                              "to the video's (num_frames - 1) / 4 + 1 latent frames); null: the transformer "
                              "config's (1 + 3 x 6 + 2 for 81 frames), or for another length its first chunk then "
                              "chunks of its largest size"),
    "use_mean_velocity": Option(True, bool, "condition every step on its target timestep r (the flow map); false: "
                                            "r = t, raw Euler"),
    "use_kv_cache": Option(True, bool, "keep each chunk's keys and values and extend them (flat cost per chunk); "
                                       "false: recompute the whole prefix after every chunk, as the reference does"),
    "cache_window": Option(None, int | None, "latent frames of compressed past the cache keeps; a longer video drops "
                                             "the oldest (memory and time per chunk stay flat); null: the model's "
                                             "trained length (the sum of its config's chunk_partition)"),
}
#: AnyFlowPipeline's (bidirectional) call arguments vidax takes.
BIDIRECTIONAL_OPTIONS = {"use_mean_velocity": FAR_OPTIONS["use_mean_velocity"]}


def _preset() -> dict:
    return {"negative_prompt": "", "output": {"fps": 16},
            "sampling": {"num_steps": 4, "guidance_scale": 1.0, "height": 480, "width": 832, "num_frames": 81,
                         "max_sequence_length": 512}}


MODELS = [
    {
        "id": "anyflow-far-wan2.1-1.3b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/AnyFlow-FAR-Wan2.1-1.3B-Diffusers",
        "default_config": "configs/anyflow_far_wan2_1_1_3b.yaml",
        "description": "AnyFlow-FAR 1.3B: Wan2.1-1.3B made causal (chunk by chunk, KV cache), any-step flow map; "
                       "text-, image- and video-to-video, streamed as it is made",
        "preset": _preset(),
        "options": FAR_OPTIONS,
    },
    {
        "id": "anyflow-far-wan2.1-14b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/AnyFlow-FAR-Wan2.1-14B-Diffusers",
        "default_config": "configs/anyflow_far_wan2_1_14b.yaml",
        "description": "AnyFlow-FAR 14B: Wan2.1-14B made causal (chunk by chunk, KV cache), any-step flow map; "
                       "text-, image- and video-to-video, streamed as it is made",
        "preset": _preset(),
        "options": FAR_OPTIONS,
    },
    {
        "id": "anyflow-wan2.1-t2v-1.3b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/AnyFlow-Wan2.1-T2V-1.3B-Diffusers",
        "default_config": "configs/anyflow_wan2_1_t2v_1_3b.yaml",
        "description": "AnyFlow 1.3B: Wan2.1-1.3B distilled to an any-step flow map (bidirectional, few steps)",
        "preset": _preset(),
        "options": BIDIRECTIONAL_OPTIONS,
    },
    {
        "id": "anyflow-wan2.1-t2v-14b",
        "tasks": ("t2v", "i2v", "v2v"),
        "hub_repo": "nvidia/AnyFlow-Wan2.1-T2V-14B-Diffusers",
        "default_config": "configs/anyflow_wan2_1_t2v_14b.yaml",
        "description": "AnyFlow 14B: Wan2.1-14B distilled to an any-step flow map (bidirectional, few steps)",
        "preset": _preset(),
        "options": BIDIRECTIONAL_OPTIONS,
    },
]

FAR_IDS = frozenset(m["id"] for m in MODELS if "far" in m["id"])
