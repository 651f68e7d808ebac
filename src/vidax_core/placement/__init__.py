"""Where a run's weights, activations and temporaries go before any weight loads: the memory plan (``memory_plan``:
every part's device and host bytes per phase, the encoder's and the decode's placement, the host line and the
refusal before the OOM killer) and the activation estimate of one block (``activations``)."""
