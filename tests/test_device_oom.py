"""Out of memory (a device's, or the CPU backend's) is one ``error:`` line naming the phase, what XLA asked for
and had, and the keys that lower it (seen on the TPU v5e: a chunked SkyReels-V2 run at 544x960 decoding a window
beside its resident denoiser), not "internal error"."""

from __future__ import annotations

import pytest
from jax.errors import JaxRuntimeError

from vidax_core import cli
from vidax_core.errors import UserError
from vidax_core.runner import device_oom

TPU_TEXT = ("RESOURCE_EXHAUSTED: E0101: RuntimeProgramAllocationFailure:\nError loading program "
            "'jit__decode_chunk_impl': Attempting to reserve 4.99G at the bottom of memory. That was not possible. "
            "There are 3.05G free, 0B reserved, and 3.05G reservable.")
ALLOC_TEXT = "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 22.50GiB."
CPU_TEXT = "INTERNAL: Error dispatching computation: Out of memory allocating 26829645144 bytes."


def test_a_program_that_cannot_load_is_out_of_memory_too():
    """Seen on the v5e (Wan2.1-14B at 720p, the second step): loading a program raised a ValueError."""
    with pytest.raises(UserError, match=r"^out of memory during sampling \(a program needed 4.99G, 3.05G was free\)"):
        with device_oom.phase("sampling"):
            raise ValueError(TPU_TEXT)


def test_a_buffer_that_cannot_be_allocated_is_out_of_memory_too():
    """Seen on the v5e (Wan2.1-14B at 720p, a tiled decode whose every tile kept its caches on the device)."""
    with pytest.raises(UserError, match=r"^out of memory during decode \(RESOURCE_EXHAUSTED: E0100"):
        with device_oom.phase("decode"):
            raise ValueError("RESOURCE_EXHAUSTED: E0100: RuntimeBufferAllocationFailure:")
    with pytest.raises(ValueError):  # any other ValueError stays what it is
        with device_oom.phase("decode"):
            raise ValueError("RESOURCE_EXHAUSTED is not an allocation failure")


@pytest.mark.parametrize("text, detail", [(TPU_TEXT, "a program needed 4.99G, 3.05G was free"),
                                          (ALLOC_TEXT, "an allocation of 22.50GiB failed"),
                                          (CPU_TEXT, "an allocation of 25.0 GiB failed")])
@pytest.mark.parametrize("name, key", [("decode", "vae.tiling=true"), ("sampling", "offload.enabled=true"),
                                       ("encode", "runtime.encode_on=cpu")])
def test_an_out_of_memory_error_names_the_phase_and_the_key(text, detail, name, key):
    with pytest.raises(UserError) as info:
        with device_oom.phase(name):
            raise JaxRuntimeError(text)
    msg = str(info.value)
    assert msg.startswith(f"out of memory during {name} ({detail}): ") and key in msg
    assert "\n" not in msg


def test_an_out_of_memory_error_inside_a_plugins_hook_is_found():
    """A hook's exception arrives wrapped (the plugin's error); XLA's, as its cause, still names the phase (seen:
    Cosmos-Reason1's encode on the CPU, 25 GiB in one allocation)."""
    from vidax_core.errors import PluginError

    with pytest.raises(UserError, match=r"^out of memory during encode \(an allocation of 25.0 GiB failed\)"):
        with device_oom.phase("encode"):
            try:
                raise JaxRuntimeError(CPU_TEXT)
            except JaxRuntimeError as exc:
                raise PluginError("error in plugin vidax-cosmos, hook encode_prompt") from exc


VMEM_TEXT = ("RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom: Ran out of memory in memory space vmem while "
             "allocating on stack for %splash_mha_fwd_no_residuals.47 = (f32)")  # seen: a Pallas kernel's tiles


@pytest.mark.parametrize("exc", [JaxRuntimeError("INTERNAL: something else"), RuntimeError(TPU_TEXT),
                                 ValueError("RESOURCE_EXHAUSTED"), JaxRuntimeError(VMEM_TEXT)])
def test_other_errors_pass_through_unchanged(exc):
    with pytest.raises(type(exc)) as info:
        with device_oom.phase("decode"):
            raise exc
    assert info.value is exc


def _raise_oom(*_a, **_k):
    raise JaxRuntimeError(TPU_TEXT)


@pytest.mark.parametrize("config, target", [
    ("configs/demo.yaml", "vidax_core.vae.wan_video.WanVideoAutoencoder.decode_video"),
    ("configs/skyreels_demo.yaml", "vidax_core.vae.wan21.DecodeStream.push"),  # a chunked run: window by window
])
def test_vidax_run_says_which_key_lowers_the_decode(config, target, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(target, _raise_oom)
    code = cli.main(["run", config, f"output.path={tmp_path / 'v.mp4'}", "output.metrics=null",
                     "sampling.num_steps=2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert err[-1].startswith("error: out of memory during decode (a program needed 4.99G, 3.05G was free): "
                              "set vae.tiling=true"), err
    assert not list(tmp_path.iterdir())  # nothing partial is left
