#!/bin/bash
# Per-kernel times (torch.profiler, plain launches) of the bicubic programs at 32x3x224^2
# (zeros, border, reflection) and of border at 1x1x512^2, on the committed change, with ATen's.
R=$OUT/profile; mkdir -p $R
export ADJOINT_LIBRARY=$PWD/.stage/build/lib/libadjoint.so ADJOINT_CACHE_DIR=/tmp/c PYTHONPATH=$PWD/python
{ nvidia-smi -L; cat .stage/build/STAGED; } > $R/device.txt 2>&1
timeout 200 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bicubic --dtypes f32 --paddings zeros,border,reflection --shape-list 32x3x224x224:224x224 > $R/bicubic_32x3.txt 2>&1
timeout 100 python3 tests/gpu/grid_sampler_kernel_profile.py --modes bicubic --dtypes f32 --paddings border --shape-list 1x1x512x512:512x512 > $R/bicubic_1x1x512.txt 2>&1
cat $R/*.txt > $OUT/summary.txt
