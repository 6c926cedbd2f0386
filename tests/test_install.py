"""Every way in: the pip extras, the conda environment, and what the code tells a user who
lacks a piece. CPU only: the header search runs against fake trees in a temporary folder."""

import re
import tomllib
from pathlib import Path

import pytest

from ladder.core import cuda_cpp, device
from ladder.core.rung import rungs

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def headers(monkeypatch, tmp_path):
    """A clean slate for the header search: no CUDA_PATH, CUDA_HOME or CONDA_PREFIX, pip's
    site-packages in ``tmp_path/site``, and include_dirs() recomputed."""
    for var in ("CUDA_PATH", "CUDA_HOME", "CONDA_PREFIX"):
        monkeypatch.delenv(var, raising=False)
    site = tmp_path / "site"
    monkeypatch.setattr(
        cuda_cpp.sysconfig, "get_paths", lambda: {"purelib": str(site), "platlib": str(site)}
    )
    cuda_cpp.include_dirs.cache_clear()
    yield tmp_path
    cuda_cpp.include_dirs.cache_clear()


def _toolkit_headers(include: Path) -> Path:
    (include / "crt").mkdir(parents=True)
    (include / "mma.h").write_text("")
    (include / "crt" / "mma.h").write_text("")
    return include


@pytest.mark.parametrize("layout", ["targets/x86_64-linux/include", "include"])
def test_headers_are_found_in_the_conda_environment(headers, monkeypatch, layout):
    """conda-forge's cuda-cudart-dev and cuda-crt put headers under targets/<platform>/include;
    other packagings under the prefix's include/."""
    prefix = headers / "env"
    include = _toolkit_headers(prefix / layout)
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    assert cuda_cpp.include_dirs() == (str(include),)


def test_headers_are_looked_for_in_order(headers, monkeypatch):
    """The toolkit the user named first, then pip's wheels, the conda environment (both
    layouts) and /usr/local/cuda; the first place that holds both headers wins."""
    toolkit = headers / "toolkit" / "include"
    wheel = _toolkit_headers(headers / "site" / "nvidia" / "cu13" / "include")
    conda = _toolkit_headers(headers / "env" / "targets" / "x86_64-linux" / "include")
    monkeypatch.setenv("CONDA_PREFIX", str(headers / "env"))
    monkeypatch.setenv("CUDA_PATH", str(toolkit.parent))
    order = [d for place in cuda_cpp._places() for d in place]
    places = [toolkit, wheel, conda, headers / "env" / "include", Path("/usr/local/cuda/include")]
    assert [order.index(p) for p in places] == sorted(order.index(p) for p in places)

    assert cuda_cpp.include_dirs() == (str(wheel),)  # CUDA_PATH names no headers here
    _toolkit_headers(toolkit)
    cuda_cpp.include_dirs.cache_clear()
    assert cuda_cpp.include_dirs() == (str(toolkit),)


def test_the_cuda_12_wheels_split_headers_are_one_place(headers, monkeypatch):
    """nvidia-cuda-runtime-cu12 holds mma.h and nvidia-cuda-nvcc-cu12 crt/: together they are
    one place, ahead of the conda environment, and never mixed with another place's headers."""
    nvidia = headers / "site" / "nvidia"
    (nvidia / "cuda_runtime" / "include").mkdir(parents=True)
    (nvidia / "cuda_runtime" / "include" / "mma.h").write_text("")
    (nvidia / "cuda_nvcc" / "include" / "crt").mkdir(parents=True)
    (nvidia / "cuda_nvcc" / "include" / "crt" / "mma.h").write_text("")
    _toolkit_headers(headers / "env" / "include")
    monkeypatch.setenv("CONDA_PREFIX", str(headers / "env"))
    split = (str(nvidia / "cuda_runtime" / "include"), str(nvidia / "cuda_nvcc" / "include"))
    assert cuda_cpp.include_dirs() == split

    (nvidia / "cuda_nvcc" / "include" / "crt" / "mma.h").unlink()  # mma.h alone: not mixed in
    cuda_cpp.include_dirs.cache_clear()
    assert cuda_cpp.include_dirs() == (str(headers / "env" / "include"),)


def test_missing_headers_list_every_place_and_each_way_to_provide_them(headers, monkeypatch):
    prefix = headers / "env"
    (prefix / "targets" / "x86_64-linux" / "include").mkdir(parents=True)
    (prefix / "targets" / "x86_64-linux" / "include" / "mma.h").write_text("")
    monkeypatch.setenv("CONDA_PREFIX", str(prefix))
    places = cuda_cpp._places()[:-1]  # this machine's /usr/local/cuda may hold them
    monkeypatch.setattr(cuda_cpp, "_places", lambda: [*places, (headers / "x",)])
    with pytest.raises(cuda_cpp.CudaBuildError) as err:
        cuda_cpp.include_dirs()
    message = str(err.value)
    assert f"{prefix / 'targets' / 'x86_64-linux' / 'include'} (has mma.h)" in message
    assert f"{prefix / 'include'} (no such folder)" in message
    assert f"{headers / 'x'} (no such folder)" in message
    assert "pip install 'numba-ladder[cuda13]'" in message
    assert "conda install -c conda-forge cuda-cudart-dev cuda-crt" in message
    assert "set CUDA_PATH to a CUDA toolkit" in message


def test_the_conda_environment_has_what_the_header_error_names():
    listed = set(re.findall(r"^\s*-\s*([\w.-]+)", (ROOT / "environment.yml").read_text(), re.M))
    conda_fix = next(fix for fix in cuda_cpp.HEADER_FIXES if fix.startswith("conda install"))
    named = conda_fix.split(":")[0].split("conda-forge")[1].split()
    assert named and set(named) <= listed


def test_the_dev_extra_goes_with_either_cuda_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {"cuda12", "cuda13", "peers", "dev"} <= set(extras)
    cuda_choice = re.compile(r"numba-cuda\[|cupy-|nvidia-|cuda-toolkit")
    assert not [r for r in extras["dev"] if cuda_choice.match(r)], "dev must not choose a CUDA"
    assert any(r.startswith("torch") for r in extras["peers"])


def test_rungs_that_need_pytorch_say_how_to_install_it(monkeypatch):
    monkeypatch.setattr(device, "gpu_available", lambda: True)
    monkeypatch.setattr(device, "torch_cuda_available", lambda: False)
    needing = [r for r in rungs() if "torch" in r.needs]
    assert needing, "the cuDNN, SDPA and torch rows are registered"
    for r in needing:
        assert "pip install 'numba-ladder[peers]'" in r.unavailable_reason(), r.key
