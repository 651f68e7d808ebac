"""Model ids of the Wan family and their reference defaults (from the published Wan configurations)."""

from __future__ import annotations

# The reference sampler's default negative prompt (Wan's `sample_neg_prompt`).
WAN_NEGATIVE_PROMPT = (
    "色调艳丽，过曝，静态，细节模糊不清，字幕，风格，作品，画作，画面，静止，整体发灰，最差质量，低质量，JPEG压缩残留，"
    "丑陋的，残缺的，多余的手指，画得不好的手部，画得不好的脸部，畸形的，毁容的，形态畸形的肢体，手指融合，"
    "静止不动的画面，杂乱的背景，三条腿，背景人很多，倒着走"
)


def _preset(height: int, width: int, steps: int = 50, guidance: float = 5.0, guidance_2: float | None = None,
            frames: int = 81, fps: int = 16) -> dict:
    sampling = {"num_steps": steps, "guidance_scale": guidance, "height": height, "width": width,
                "num_frames": frames, "max_sequence_length": 512}
    if guidance_2 is not None:
        sampling["guidance_scale_2"] = guidance_2
    return {"negative_prompt": WAN_NEGATIVE_PROMPT, "sampling": sampling, "output": {"fps": fps}}


def _comfy(*dits: str, vae: str = "wan_2.1_vae*", image: bool = False) -> dict:
    """The Comfy-Org file names of one id (``Comfy-Org/Wan_2.{1,2}_ComfyUI_Repackaged`` ``split_files/``): its DiT
    (two experts: high then low noise), UMT5-XXL (fp16 or fp8_e4m3fn_scaled), VAE and, for I2V, CLIP ViT-H."""
    files = {"text_encoder": ("umt5_xxl*",), "vae": (vae,)}
    files.update({c: (d,) for c, d in zip(("transformer", "transformer_2"), dits)})
    if image:
        files["image_encoder"] = ("clip_vision_h*",)
    return files


MODELS = [
    {
        "id": "wan2.1-t2v-1.3b",
        "comfy_files": _comfy("wan2.1_t2v_1.3b*"),
        "tasks": ("t2v",),
        "hub_repo": "Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
        "original_repo": "Wan-AI/Wan2.1-T2V-1.3B",
        "default_config": "configs/wan21_1_3b_480p.yaml",
        "description": "Wan2.1 text-to-video, 1.3B DiT (30 blocks, width 1536), 480p",
        "preset": _preset(480, 832),
    },
    {
        "id": "wan2.1-t2v-14b",
        "comfy_files": _comfy("wan2.1_t2v_14b*"),
        "tasks": ("t2v",),
        "hub_repo": "Wan-AI/Wan2.1-T2V-14B-Diffusers",
        "original_repo": "Wan-AI/Wan2.1-T2V-14B",
        "default_config": "configs/wan21_14b_720p.yaml",
        "description": "Wan2.1 text-to-video, 14B DiT (40 blocks, width 5120), 720p and 480p",
        "preset": _preset(720, 1280),
    },
    {
        "id": "wan2.1-i2v-14b-480p",
        "comfy_files": _comfy("wan2.1_i2v_480p_14b*", image=True),
        "tasks": ("i2v",),
        "hub_repo": "Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
        "original_repo": "Wan-AI/Wan2.1-I2V-14B-480P",
        "default_config": "configs/wan21_i2v_14b_480p.yaml",
        "description": "Wan2.1 image-to-video, 14B DiT with CLIP image cross-attention, 480p",
        "preset": _preset(480, 832, steps=40),
    },
    {
        "id": "wan2.1-i2v-14b-720p",
        "comfy_files": _comfy("wan2.1_i2v_720p_14b*", image=True),
        "tasks": ("i2v",),
        "hub_repo": "Wan-AI/Wan2.1-I2V-14B-720P-Diffusers",
        "original_repo": "Wan-AI/Wan2.1-I2V-14B-720P",
        "default_config": "configs/wan21_i2v_14b_720p.yaml",
        "description": "Wan2.1 image-to-video, 14B DiT with CLIP image cross-attention, 720p",
        "preset": _preset(720, 1280, steps=40),
    },
    {
        "id": "wan2.2-t2v-a14b",
        "comfy_files": _comfy("wan2.2_t2v_high_noise_14b*", "wan2.2_t2v_low_noise_14b*"),
        "tasks": ("t2v",),
        "hub_repo": "Wan-AI/Wan2.2-T2V-A14B-Diffusers",
        "original_repo": "Wan-AI/Wan2.2-T2V-A14B",
        "default_config": "configs/wan22_t2v_a14b_720p.yaml",
        "description": "Wan2.2 text-to-video, two 14B experts (high/low noise) switched at the boundary timestep",
        "preset": _preset(720, 1280, steps=40, guidance=4.0, guidance_2=3.0),
    },
    {
        "id": "wan2.2-i2v-a14b",
        "comfy_files": _comfy("wan2.2_i2v_high_noise_14b*", "wan2.2_i2v_low_noise_14b*"),
        "tasks": ("i2v",),
        "hub_repo": "Wan-AI/Wan2.2-I2V-A14B-Diffusers",
        "original_repo": "Wan-AI/Wan2.2-I2V-A14B",
        "default_config": "configs/wan22_i2v_a14b_720p.yaml",
        "description": "Wan2.2 image-to-video, two 14B experts switched at the boundary timestep",
        "preset": _preset(720, 1280, steps=40, guidance=3.5, guidance_2=3.5),
    },
    {
        "id": "wan2.2-ti2v-5b",
        "comfy_files": _comfy("wan2.2_ti2v_5b*", vae="wan2.2_vae*"),
        "tasks": ("t2v", "ti2v"),
        "hub_repo": "Wan-AI/Wan2.2-TI2V-5B-Diffusers",
        "original_repo": "Wan-AI/Wan2.2-TI2V-5B",
        "default_config": "configs/wan22_ti2v_5b_720p.yaml",
        "description": "Wan2.2 text/image-to-video 5B with the 48-channel Wan2.2 VAE, 720p at 24 fps",
        "preset": _preset(704, 1280, steps=50, guidance=5.0, frames=121, fps=24),
    },
]


# Height and width must be multiples of the VAE's spatial factor times the DiT's patch size.
_SPATIAL_MULTIPLE = {"wan2.2-ti2v-5b": 32}


def spatial_multiple(model_id: str) -> int:
    return _SPATIAL_MULTIPLE.get(model_id, 16)
