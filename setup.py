"""The decode kernels in C (roceview/kernels/_ckernel.c), the flow index of the analysis
(_flowindex.c), the CSV cell text (roceview/kernels/_celltext.c) and the operations' direct
completion matching (_opsmatch.c). Optional: where no compiler is available the package installs without it and
decodes with the numba fallback, the `roceview[numba]` extra (the flow index with numpy); with neither,
roceview says in one line what to install."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "roceview.kernels._ckernel",
    sources=["roceview/kernels/_ckernel.c", "roceview/kernels/_walk.c", "roceview/kernels/_flowindex.c",
             "roceview/kernels/_celltext.c", "roceview/kernels/_opsmatch.c"],
    depends=["roceview/kernels/_fields_kernel.h"],
    extra_compile_args=["-O3", "-fno-strict-aliasing"],
    optional=True,
)])
