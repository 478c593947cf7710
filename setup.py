"""The decode kernels in C (roceview/capture/_ckernel.c), the flow index of the analysis
(_flowindex.c) and the CSV cell text (roceview/render/_celltext.c). Optional: where no compiler is available the package installs without it and
decodes with the numba fallback, the `roceview[numba]` extra (the flow index with numpy); with neither,
roceview says in one line what to install."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "roceview.capture._ckernel",
    sources=["roceview/capture/_ckernel.c", "roceview/capture/_walk.c", "roceview/capture/_flowindex.c",
             "roceview/render/_celltext.c"],
    depends=["roceview/capture/_fields_kernel.h"],
    extra_compile_args=["-O3", "-fno-strict-aliasing"],
    optional=True,
)])
