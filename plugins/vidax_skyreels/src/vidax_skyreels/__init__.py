"""vidax-skyreels: SkyReels-V2 (Skywork) in vidax, text-to-video and diffusion-forcing long video."""
