"""Published calibrations shipped with vidax, as data: MagCache magnitude ratios and TeaCache polynomials.

MagCache ratios: Zehong-Ma/MagCache, MagCache4Wan2.1/magcache_generate.py (50 steps for T2V, 40 for I2V, as that
script's defaults). The script lists one ratio per model call, conditional and unconditional interleaved, after
a padding pair of 1.0; here each guidance branch gets its own list (the padding first), which the schedule
interpolates to the run's step count as that script and diffusers' ``nearest_interp`` do.

TeaCache coefficients: ali-vilab/TeaCache, TeaCache4Wan2.1/teacache_generate.py (``use_ret_steps`` true: the
polynomial fitted on the time projection ``e0`` with 5 retention steps; false: the one fitted on the time
embedding ``e``, one retention step and the last step always computed), and
TeaCache4CogVideoX1.5/teacache_sample_video.py (``coefficients_dict``: one mode, fitted on the time embedding
``emb``, the first and last steps computed, which is the Wan rule without retention steps) and
TeaCache4LTX-Video/teacache_ltx.py (its signal is the first block's modulated input, so vidax decides it on the
device; fitted on LTX-Video 0.9.1) and TeaCache4HunyuanVideo/teacache_sample_video.py (likewise, its first
double block's modulated video input). All at ali-vilab/TeaCache commit 7c10efc.
"""

from __future__ import annotations

_T2V_1_3B = [1.0124, 1.02213, 1.00166, 1.0041, 0.99791, 1.00061, 0.99682, 0.99762, 0.99634, 0.99685, 0.99567,
             0.99586, 0.99416, 0.99422, 0.99578, 0.99575, 0.9957, 0.99563, 0.99511, 0.99506, 0.99535, 0.99531,
             0.99552, 0.99549, 0.99541, 0.99539, 0.9954, 0.99536, 0.99489, 0.99485, 0.99518, 0.99514, 0.99484,
             0.99478, 0.99481, 0.99479, 0.99415, 0.99413, 0.99419, 0.99416, 0.99396, 0.99393, 0.99388, 0.99386,
             0.99349, 0.99349, 0.99309, 0.99304, 0.9927, 0.9927, 0.99228, 0.99226, 0.99171, 0.9917, 0.99137,
             0.99135, 0.99068, 0.99063, 0.99005, 0.99003, 0.98944, 0.98942, 0.98849, 0.98849, 0.98758, 0.98757,
             0.98644, 0.98643, 0.98504, 0.98503, 0.9836, 0.98359, 0.98202, 0.98201, 0.97977, 0.97978, 0.97717,
             0.97718, 0.9741, 0.97411, 0.97003, 0.97002, 0.96538, 0.96541, 0.9593, 0.95933, 0.95086, 0.95089,
             0.94013, 0.94019, 0.92402, 0.92414, 0.90241, 0.9026, 0.86821, 0.86868, 0.81838, 0.81939]
_T2V_14B = [1.02504, 1.03017, 1.00025, 1.00251, 0.9985, 0.99962, 0.99779, 0.99771, 0.9966, 0.99658, 0.99482,
            0.99476, 0.99467, 0.99451, 0.99664, 0.99656, 0.99434, 0.99431, 0.99533, 0.99545, 0.99468, 0.99465,
            0.99438, 0.99434, 0.99516, 0.99517, 0.99384, 0.9938, 0.99404, 0.99401, 0.99517, 0.99516, 0.99409,
            0.99408, 0.99428, 0.99426, 0.99347, 0.99343, 0.99418, 0.99416, 0.99271, 0.99269, 0.99313, 0.99311,
            0.99215, 0.99215, 0.99218, 0.99215, 0.99216, 0.99217, 0.99163, 0.99161, 0.99138, 0.99135, 0.98982,
            0.9898, 0.98996, 0.98995, 0.9887, 0.98866, 0.98772, 0.9877, 0.98767, 0.98765, 0.98573, 0.9857, 0.98501,
            0.98498, 0.9838, 0.98376, 0.98177, 0.98173, 0.98037, 0.98035, 0.97678, 0.97677, 0.97546, 0.97543,
            0.97184, 0.97183, 0.96711, 0.96708, 0.96349, 0.96345, 0.95629, 0.95625, 0.94926, 0.94929, 0.93964,
            0.93961, 0.92511, 0.92504, 0.90693, 0.90678, 0.8796, 0.87945, 0.86111, 0.86189]
_I2V_480P = [0.98783, 0.98993, 0.97559, 0.97593, 0.98311, 0.98319, 0.98202, 0.98225, 0.9888, 0.98878, 0.98762,
             0.98759, 0.98957, 0.98971, 0.99052, 0.99043, 0.99383, 0.99384, 0.98857, 0.9886, 0.99065, 0.99068,
             0.98845, 0.98847, 0.99057, 0.99057, 0.98957, 0.98961, 0.98601, 0.9861, 0.98823, 0.98823, 0.98756,
             0.98759, 0.98808, 0.98814, 0.98721, 0.98724, 0.98571, 0.98572, 0.98543, 0.98544, 0.98157, 0.98165,
             0.98411, 0.98413, 0.97952, 0.97953, 0.98149, 0.9815, 0.9774, 0.97742, 0.97825, 0.97826, 0.97355,
             0.97361, 0.97085, 0.97087, 0.97056, 0.97055, 0.96588, 0.96587, 0.96113, 0.96124, 0.9567, 0.95681,
             0.94961, 0.94969, 0.93973, 0.93988, 0.93217, 0.93224, 0.91878, 0.91896, 0.90955, 0.90954, 0.92617,
             0.92616]
_I2V_720P = [0.99428, 0.99498, 0.98588, 0.98621, 0.98273, 0.98281, 0.99018, 0.99023, 0.98911, 0.98917, 0.98646,
             0.98652, 0.99454, 0.99456, 0.9891, 0.98909, 0.99124, 0.99127, 0.99102, 0.99103, 0.99215, 0.99212,
             0.99515, 0.99515, 0.99576, 0.99572, 0.99068, 0.99072, 0.99097, 0.99097, 0.99166, 0.99169, 0.99041,
             0.99042, 0.99201, 0.99198, 0.99101, 0.99101, 0.98599, 0.98603, 0.98845, 0.98844, 0.98848, 0.98851,
             0.98862, 0.98857, 0.98718, 0.98719, 0.98497, 0.98497, 0.98264, 0.98263, 0.98389, 0.98393, 0.97938,
             0.9794, 0.97535, 0.97536, 0.97498, 0.97499, 0.973, 0.97301, 0.96827, 0.96828, 0.96261, 0.96263,
             0.95335, 0.9534, 0.94649, 0.94655, 0.93397, 0.93414, 0.91636, 0.9165, 0.89088, 0.89109, 0.8679,
             0.86768]

MAG_SOURCE = "Zehong-Ma/MagCache MagCache4Wan2.1/magcache_generate.py"
TEACACHE_SOURCE = ("ali-vilab/TeaCache TeaCache4Wan2.1/teacache_generate.py, "
                   "TeaCache4CogVideoX1.5/teacache_sample_video.py, TeaCache4LTX-Video/teacache_ltx.py, "
                   "TeaCache4HunyuanVideo/teacache_sample_video.py")


def _per_branch(interleaved: list[float]) -> dict[str, list[float]]:
    full = [1.0, 1.0] + interleaved
    return {"cond": full[0::2], "uncond": full[1::2]}


MAG_RATIOS: dict[str, dict[str, list[float]]] = {
    "wan2.1-t2v-1.3b": _per_branch(_T2V_1_3B),
    "wan2.1-t2v-14b": _per_branch(_T2V_14B),
    "wan2.1-i2v-14b-480p": _per_branch(_I2V_480P),
    "wan2.1-i2v-14b-720p": _per_branch(_I2V_720P),
}

# model id -> {use_ret_steps: coefficients (highest power first, numpy.poly1d order)}
TEACACHE_COEFFICIENTS: dict[str, dict[bool, list[float]]] = {
    "wan2.1-t2v-1.3b": {True: [-5.21862437e+04, 9.23041404e+03, -5.28275948e+02, 1.36987616e+01, -4.99875664e-02],
                        False: [2.39676752e+03, -1.31110545e+03, 2.01331979e+02, -8.29855975e+00, 1.37887774e-01]},
    "wan2.1-t2v-14b": {True: [-3.03318725e+05, 4.90537029e+04, -2.65530556e+03, 5.87365115e+01, -3.15583525e-01],
                       False: [-5784.54975374, 5449.50911966, -1811.16591783, 256.27178429, -13.02252404]},
    "wan2.1-i2v-14b-480p": {True: [2.57151496e+05, -3.54229917e+04, 1.40286849e+03, -1.35890334e+01, 1.32517977e-01],
                            False: [-3.02331670e+02, 2.23948934e+02, -5.25463970e+01, 5.87348440e+00, -2.01973289e-01]},
    "wan2.1-i2v-14b-720p": {True: [8.10705460e+03, 2.13393892e+03, -3.72934672e+02, 1.66203073e+01, -4.17769401e-02],
                            False: [-114.36346466, 65.26524496, -18.82220707, 4.91518089, -0.23412683]},
    # TeaCache4CogVideoX1.5 (5B-I2V shares 5B's polynomial there)
    "cogvideox-2b": {False: [-3.10658903e+01, 2.54732368e+01, -5.92380459e+00, 1.75769064e+00, -3.61568434e-03]},
    "cogvideox-5b": {False: [-1.53880483e+03, 8.43202495e+02, -1.34363087e+02, 7.97131516e+00, -5.23162339e-02]},
    "cogvideox-5b-i2v": {False: [-1.53880483e+03, 8.43202495e+02, -1.34363087e+02, 7.97131516e+00,
                                 -5.23162339e-02]},
    "cogvideox1.5-5b": {False: [2.50210439e+02, -1.65061612e+02, 3.57804877e+01, -7.81551492e-01, 3.58559703e-02]},
    "cogvideox1.5-5b-i2v": {False: [1.22842302e+02, -1.04088754e+02, 2.62981677e+01, -3.06009921e-01,
                                    3.71213220e-02]},
    # TeaCache4LTX-Video/teacache_ltx.py, fitted on LTX-Video 0.9.1 (which vidax has no preset for: the 0.9.8 ids
    # take it only as cache.coefficients, a choice the user makes knowingly); decided on the device
    # TeaCache4HunyuanVideo/teacache_sample_video.py (HunyuanVideo T2V); decided on the device
    "hunyuanvideo-t2v-13b": {False: [7.33226126e+02, -4.01131952e+02, 6.75869174e+01, -3.14987800e+00,
                                     9.61237896e-02]},
    "ltx-video-0.9.1": {False: [2.14700694e+01, -1.28016453e+01, 2.31279151e+00, 7.92487521e-01, 9.69274326e-03]},
}
