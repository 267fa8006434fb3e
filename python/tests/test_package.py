"""The installed package ships its type stubs and names every class the stubs declare."""

import ast
import pathlib

import sluice


def test_stubs_ship_with_the_package_and_match_the_module():
    root = pathlib.Path(sluice.__file__).parent
    assert (root / "py.typed").exists()
    stub = root / "_sluice.pyi"
    assert stub.exists()
    tree = ast.parse(stub.read_text())
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in classes | functions:
        if name == "CudaSource" and not sluice.CUDA_SUPPORT:
            continue
        assert hasattr(sluice._sluice, name), f"the stubs declare {name}, the module lacks it"
    for name in dir(sluice._sluice):
        if not name.startswith("_") and name != "CUDA_SUPPORT":
            assert name in classes | functions, f"{name} has no stub"


def test_the_tests_import_the_installed_package():
    # scripts/test-python.sh installs the wheel; the sources in python/sluice lack the
    # extension module unless `maturin develop` put it there.
    assert pathlib.Path(sluice._sluice.__file__).exists()
