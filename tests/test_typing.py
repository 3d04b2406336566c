"""Type checkers see the front end: real functions and Tensor's operators generated from the table
by the build, `py.typed`, and a user script that calls every front-end function and Tensor operator
passes `mypy --strict` (and a wrong one fails); Tensor is a real type to mypy, never Any."""
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import dmlgpu
from dmlgpu.front import functions, numpy_api, tensor_operators
from dmlgpu.layout import views
from dmlgpu.table.dtypes import DataType
from dmlgpu.table.operators import OPERATORS
from dmlgpu.front.tensor_operators import TensorOperators

PYTHON_OPERATORS = [op for op in OPERATORS if op.python_operator]

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(dmlgpu.__file__).resolve().parent


#: The package folder where Python found the modules the build writes from the table (in its
#: `front/`): the wheel's package, an editable install's build tree, or the source tree.
GENERATED = Path(functions.__file__).resolve().parents[1]


def _generated_folders() -> list[Path]:
    """GENERATED, and the source tree's copies where they are elsewhere (an editable install: type
    checkers read the source tree)."""
    source = ROOT / "dmlgpu"
    return [GENERATED] + ([source] if (source / "front" / "functions.py").is_file() and source.resolve() != GENERATED else [])


@pytest.mark.parametrize("folder", _generated_folders(), ids=lambda f: "imported" if f == GENERATED else "source-tree")
def test_generated_modules_are_current(folder):
    """The generated modules are what tools/generate_functions.py writes from today's table: a build
    that missed a changed row (or generator) fails here, as does an editable install not rebuilt."""
    assert Path(tensor_operators.__file__).resolve().parents[1] == GENERATED
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "generate_functions.py"), "--check", str(folder)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_generated_modules_are_not_kept_in_git():
    """They are build products (CMakeLists.txt runs the generator): a new row never edits them."""
    if not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout")
    names = ["dmlgpu/front/functions.py", "dmlgpu/front/tensor_operators.py"]
    tracked = subprocess.run(["git", "ls-files", "--", *names], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    assert tracked == []
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == names


def test_the_package_is_typed():
    assert (PACKAGE / "py.typed").is_file()


@pytest.mark.parametrize("op", OPERATORS, ids=lambda op: op.short)
def test_every_row_has_a_real_function(op):
    function = getattr(dmlgpu, op.short)
    assert function is numpy_api.FUNCTIONS[op.short] is getattr(functions, op.short)
    assert Path(inspect.getsourcefile(function)).resolve() == GENERATED / "front" / "functions.py"
    operands = ["x"] if len(op.inputs) == 1 else ["a", "b"]
    keywords = (["dtype"] if not op.same_type else []) + ["feature_level"]
    parameters = inspect.signature(function).parameters
    assert list(parameters) == operands + ["out"] + keywords
    assert all(parameters[k].kind is inspect.Parameter.KEYWORD_ONLY for k in keywords)
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters.values())


def _call(op, operand: str, dtype: str) -> str:
    args = ", ".join([operand] * len(op.inputs))
    return f"dmlgpu.{op.short}({args}{', dtype=np.uint32' if not op.same_type and dtype else ''})"


def user_script() -> str:
    """Every front-end function, on numpy data and on Tensors, with and without `out`."""
    lines = ["from __future__ import annotations", "", "from typing import Any", "", "import numpy as np",
             "import numpy.typing as npt", "", "import dmlgpu", "from dmlgpu import ReduceFunction",
             "", "",
             "def main() -> None:"]
    for op in OPERATORS:
        types = op.newest.input_types  # exact comparison: an integer type (no NaN bits)
        kind = (DataType.UINT32 if DataType.UINT32 in types else types[-1]).numpy.name
        out_kind = kind if op.same_type else "uint32"
        lines += [
            f"    x_{op.short} = np.arange(6, dtype=np.{kind})",
            f"    t_{op.short} = dmlgpu.Tensor.from_numpy(x_{op.short})",
            f"    host_{op.short}: Any = {_call(op, f'x_{op.short}', 'u4')}",
            f"    out_{op.short}: npt.NDArray[Any] = np.empty(6, np.{out_kind})",
            f"    {_call(op, f'x_{op.short}', 'u4')[:-1]}, out=out_{op.short})",
            f"    resident_{op.short}: dmlgpu.Tensor = {_call(op, f't_{op.short}', 'u4')}",
            f"    level_{op.short}: dmlgpu.Tensor = {_call(op, f't_{op.short}', '')[:-1]}, "
            f"out=resident_{op.short}, feature_level=dmlgpu.FeatureLevel.LEVEL_6_4)",
            f"    assert (level_{op.short}.numpy() == host_{op.short}).all()",
            f"    assert (out_{op.short} == host_{op.short}).all()",
        ]
    for op in PYTHON_OPERATORS:  # Tensor's operators: `t ^ u`, `5 ^ t`, `t ^= u` as their methods
        t, name = f"t_{op.short}", op.python_operator
        lines.append(f"    forms_{op.short}: list[dmlgpu.Tensor] = [{t}.__{name}__()]" if len(op.inputs) == 1 else
                     f"    forms_{op.short}: list[dmlgpu.Tensor] = [{t}.__{name}__({t}), {t}.__r{name}__(1), "
                     f"{t}.__{name}__(x_{op.short}), {t}.__i{name}__(0)]")
        lines.append(f"    assert all(f.shape == {t}.shape for f in forms_{op.short})")
    lines += ["    public_api()", "", ""] + PUBLIC_API.splitlines()
    lines += ["", "", 'if __name__ == "__main__":', "    main()", ""]
    return "\n".join(lines)


#: The rest of the public API, each call on numpy data and on Tensors where it takes both, with the
#: types a user writes down: numpy in, numpy.ndarray out; a Tensor in, a Tensor out.
PUBLIC_API = """\
def public_api() -> None:
    x = np.arange(12, dtype=np.uint32).reshape(3, 4)
    t: dmlgpu.Tensor = dmlgpu.asarray(x)
    made: list[dmlgpu.Tensor] = [dmlgpu.asarray([1, 2], dtype=np.uint8), dmlgpu.asarray(t), dmlgpu.empty((2, 3)),
                                 dmlgpu.zeros(4, np.uint16), dmlgpu.ones((2,), np.int8), dmlgpu.full((2, 2), 7),
                                 dmlgpu.Tensor.from_numpy(x), dmlgpu.Tensor.empty((3,), np.uint8)]
    assert made[5].tolist() == [[7, 7], [7, 7]]
    host: list[npt.NDArray[Any]] = [dmlgpu.sum(x), dmlgpu.min(x, axis=0), dmlgpu.max(x, axis=(0, 1)), dmlgpu.prod(x),
                                    dmlgpu.argmin(x), dmlgpu.argmax(x, axis=1, keepdims=True),
                                    dmlgpu.bit_xor(x, x), dmlgpu.bit_xor(1, x), dmlgpu.bit_not(x, out=x.copy())]
    device: list[dmlgpu.Tensor] = [dmlgpu.sum(t), dmlgpu.min(t, axis=0), dmlgpu.max(t), dmlgpu.prod(t),
                                   dmlgpu.argmin(t), dmlgpu.argmax(t, axis=1), t.sum(), t.min(axis=1), t.max(),
                                   t.prod(), t.argmin(), t.argmax(keepdims=True), t.ravel(), t.flatten(), t.T.copy()]
    assert int(device[0]) == int(host[0]) == 66
    f = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    ft: dmlgpu.Tensor = dmlgpu.asarray(f)
    host += [dmlgpu.mean(f), dmlgpu.mean(f, axis=1), dmlgpu.logsumexp(f, axis=(0, 1), keepdims=True),
             dmlgpu.norm(f, ord=1), dmlgpu.norm(f, ord=2, axis=0), dmlgpu.reduce(x, ReduceFunction.SUM_SQUARE, axis=1),
             dmlgpu.reduce(f, ReduceFunction.AVERAGE, feature_level=dmlgpu.FeatureLevel.LEVEL_6_4)]
    device += [dmlgpu.mean(ft), dmlgpu.mean(ft, axis=0, keepdims=True), dmlgpu.logsumexp(ft, axis=1),
               dmlgpu.norm(ft, ord=1), dmlgpu.norm(ft, ord=2, axis=(0, 1)), dmlgpu.reduce(t, ReduceFunction.SUM_SQUARE),
               dmlgpu.reduce(ft, ReduceFunction.L1, axis=0, keepdims=True)]
    assert abs(float(dmlgpu.norm(ft, ord=1)) - float(dmlgpu.norm(f, ord=1))) < 1e-6
    try:
        dmlgpu.mean(x)  # integers: DirectML's AVERAGE takes floats
    except dmlgpu.DataTypeError as error:
        rejected: dmlgpu.ValidationError = error
        assert rejected.field == "DataType"
    values, indices = dmlgpu.top_k(x, 2)
    host += [values, indices]
    t_values, t_indices = dmlgpu.top_k(t, 2, axis=0, largest=False)
    device += [t_values, t_indices]
    codes = np.packbits(np.arange(64 * 16, dtype=np.uint8).reshape(64, 16) & 1, axis=1)
    index = dmlgpu.HammingIndex(codes)
    distances, rows = index.search(codes[:4], 3)
    t_distances, t_rows = index.search(dmlgpu.asarray(codes[:4]), 3)
    knn_distances, knn_rows = dmlgpu.hamming_knn(codes, codes[:4], 3)
    t_knn_distances, t_knn_rows = dmlgpu.hamming_knn(codes, dmlgpu.asarray(codes[:4]), 3)
    host += [distances, rows, knn_distances, knn_rows]
    device += [t_distances, t_rows, t_knn_distances, t_knn_rows]

    @dmlgpu.fuse
    def unpack(w: dmlgpu.Tensor, shift: int) -> tuple[dmlgpu.Tensor, dmlgpu.Tensor]:
        return w & 15, w >> shift

    @dmlgpu.fuse(feature_level=dmlgpu.FeatureLevel.LEVEL_6_4)
    def unpack_host(w: npt.NDArray[np.uint8]) -> npt.NDArray[np.uint8]:
        return dmlgpu.bit_and(w, 15)

    low, high = unpack(dmlgpu.asarray(codes), shift=4)
    device += [low, high]
    host.append(unpack_host(codes))

    gpu: dmlgpu.Device = dmlgpu.default_device()
    listed: list[dict[str, Any]] = dmlgpu.devices()
    limits: dict[str, int] = dmlgpu.set_cache_limits(pipelines=256)
    desc = dmlgpu.TensorDesc(dmlgpu.DataType.UINT32, [12])
    # The descriptor classes are made from the operator table at import: mypy sees no such names.
    not_op: Any = getattr(dmlgpu, "ElementWiseBitNotOperatorDesc")(desc, desc)
    dmlgpu.validate(not_op, dmlgpu.FeatureLevel.LEVEL_4_1)
    nbytes: int = dmlgpu.calc_buffer_tensor_size(dmlgpu.DataType.UINT32, [12])
    compiled: dmlgpu.CompiledOperator = gpu.create_operator(not_op)
    buffer: dmlgpu.Buffer = gpu.upload(x)
    compiled.execute([dmlgpu.Binding(buffer)], [dmlgpu.Binding(buffer, 0, nbytes)])
    commands = dmlgpu.CommandList(gpu)
    commands.record(compiled, [dmlgpu.Binding(buffer)], [dmlgpu.Binding(buffer)])
    commands.execute()
    read: npt.NDArray[np.uint8] = buffer.read()
    assert (read.view(np.uint32) == x.ravel()).all()  # NOT twice: eagerly, then by the command list
    xor_op: Any = getattr(dmlgpu, "ElementWiseBitXorOperatorDesc")(desc, desc, desc)
    nodes = [dmlgpu.ConstantDataGraphNodeDesc(bytes(nbytes), name="zeros"),
             dmlgpu.OperatorGraphNodeDesc(xor_op, name="xor"), dmlgpu.OperatorGraphNodeDesc(not_op)]
    chain = dmlgpu.GraphDesc(1, 1, nodes, [dmlgpu.InputGraphEdgeDesc(0, 1, 0)], [dmlgpu.OutputGraphEdgeDesc(2, 0, 0)],
                             [dmlgpu.IntermediateGraphEdgeDesc(0, 0, 1, 1), dmlgpu.IntermediateGraphEdgeDesc(1, 0, 2, 0)])
    inverted = gpu.allocate(nbytes)
    gpu.compile_graph(chain).execute([dmlgpu.Binding(buffer)], [dmlgpu.Binding(inverted)])
    assert (inverted.read().view(np.uint32) == ~x.ravel()).all()  # NOT(x ^ 0)
    graph = dmlgpu.GraphDesc(1, 1, [not_op], [dmlgpu.InputGraphEdgeDesc(0, 0, 0)], [dmlgpu.OutputGraphEdgeDesc(0, 0, 0)])
    fused: dmlgpu.CompiledGraph = gpu.compile_graph(graph)
    fused.execute([dmlgpu.Binding(buffer)], [dmlgpu.Binding(gpu.allocate(nbytes))])
    assert len(listed) >= 1 and limits["pipelines"] == 256
    assert all(isinstance(a, np.ndarray) for a in host) and all(isinstance(a, dmlgpu.Tensor) for a in device)
"""


#: Calls a type checker must reject: a str level, a Tensor result read as an ndarray, an
#: unknown keyword, a dtype on a same-type operator, an operator that does not exist.
WRONG = """\
import numpy as np
import numpy.typing as npt

import dmlgpu

x = np.arange(6, dtype=np.uint8)
t = dmlgpu.Tensor.from_numpy(x)
dmlgpu.bit_not(x, feature_level="6_4")
a: npt.NDArray[np.uint8] = dmlgpu.bit_xor(t, x)
dmlgpu.sign(x, order="C")
dmlgpu.bit_not(x, dtype=np.uint8)
dmlgpu.bit_nand(x, x)
"""


def _mypy(tmp_path, name: str, text: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy", reason="mypy is not installed (tools/versions.sh TEST_PIP_PACKAGES has it)")
    script = tmp_path / name
    script.write_text(text)
    return subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                           "--cache-dir", str(tmp_path / "cache"), str(script)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_the_user_script_calls_every_public_function():
    """Each function in `dmlgpu.__all__` is called in the script mypy checks (a new one fails here
    until the script calls it)."""
    text = user_script()
    public = [name for name in dmlgpu.__all__ if callable(getattr(dmlgpu, name))
              and not inspect.isclass(getattr(dmlgpu, name))]
    assert {"mean", "logsumexp", "norm", "reduce", "validate", "hamming_knn"} <= set(public)
    assert [name for name in public if f"dmlgpu.{name}(" not in text] == []


def test_mypy_strict_passes_a_script_calling_every_function(tmp_path):
    text = user_script()
    result = _mypy(tmp_path, "user.py", text)
    assert result.returncode == 0, result.stdout + result.stderr
    # ... and the script runs as it reads.
    run = subprocess.run([sys.executable, str(tmp_path / "user.py")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy_strict_rejects_wrong_calls(tmp_path):
    result = _mypy(tmp_path, "wrong.py", WRONG)
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [8, 9, 10, 11, 12], result.stdout


@pytest.mark.parametrize("module", ["functions.py", "tensor_operators.py"])
def test_the_generated_modules_pass_mypy_strict(tmp_path, module):
    pytest.importorskip("mypy", reason="mypy is not installed (tools/versions.sh TEST_PIP_PACKAGES has it)")
    result = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-incremental",
                             "--cache-dir", str(tmp_path / "cache"), "-m", f"dmlgpu.front.{module[:-3]}"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


#: Tensor as mypy sees it: every line from 6 on reveals Tensor or is an error (a Tensor is no
#: ndarray, no int). Were Tensor Any to mypy (a base class made at run time), the reveals would
#: say Any and the assignments would pass.
TENSOR_TYPES = """\
import numpy as np
import numpy.typing as npt
import dmlgpu
x = np.arange(6, dtype=np.uint8)
t = dmlgpu.Tensor.from_numpy(x)
reveal_type(t)
reveal_type(t ^ t)
reveal_type(t ^ x)
reveal_type(5 ^ t)
reveal_type(~t)
reveal_type(t[1:] << 1)
reveal_type(dmlgpu.bit_and(t, x))
a: npt.NDArray[np.uint8] = t
b: npt.NDArray[np.uint8] = t ^ x
c: int = ~t
d: dmlgpu.Tensor = x
t ^= "3"
"""


def test_mypy_sees_tensor_as_a_real_type(tmp_path):
    result = _mypy(tmp_path, "tensor_types.py", TENSOR_TYPES)
    reveals = [line for line in result.stdout.splitlines() if "Revealed type is" in line]
    assert len(reveals) == 7 and all(line.endswith('"dmlgpu.front.tensor.Tensor"') for line in reveals), result.stdout
    errors = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line})
    assert errors == [13, 14, 15, 16, 17], result.stdout


def test_tensor_operators_are_declared_in_the_generated_module():
    """Tensor's operators are real methods of `TensorOperators` (no base class made at run time)."""
    assert dmlgpu.Tensor.__mro__[1:3] == (views.View, TensorOperators)
    for op in PYTHON_OPERATORS:
        for prefix in [""] if len(op.inputs) == 1 else ["", "r", "i"]:
            method = getattr(dmlgpu.Tensor, f"__{prefix}{op.python_operator}__")
            assert Path(inspect.getsourcefile(method)).resolve() == GENERATED / "front" / "tensor_operators.py"
            assert inspect.signature(method).return_annotation == "_Self"


#: numpy data in, numpy.ndarray out; a Tensor in, a Tensor out: what mypy reveals, line by line
#: (each reveal's line number -> what its type must name).
IN_OUT_TYPES = """\
import numpy as np
import dmlgpu
x = np.arange(6, dtype=np.uint8)
t = dmlgpu.asarray(x)
codes = x.reshape(2, 3)
@dmlgpu.fuse
def fused(w: dmlgpu.Tensor, s: int) -> dmlgpu.Tensor:
    return w >> s
reveal_type(dmlgpu.bit_xor(x, x))
reveal_type(dmlgpu.bit_xor(7, x))
reveal_type(dmlgpu.bit_count(x, dtype=np.uint32))
reveal_type(dmlgpu.sum(x, axis=0))
reveal_type(dmlgpu.top_k(x, 2))
reveal_type(dmlgpu.hamming_knn(codes, codes, 1))
reveal_type(dmlgpu.HammingIndex(codes).search(codes, 1))
reveal_type(dmlgpu.bit_xor(t, x))
reveal_type(dmlgpu.bit_not(x, out=t))
reveal_type(dmlgpu.argmax(t))
reveal_type(t.sum())
reveal_type(dmlgpu.top_k(t, 2))
reveal_type(dmlgpu.HammingIndex(codes).search(t.reshape(2, 3), 1))
reveal_type(dmlgpu.Tensor.from_numpy(x))
reveal_type(dmlgpu.full((2, 2), 7))
reveal_type(fused(t, s=3))
fused(x, 3)
from dmlgpu import ReduceFunction
reveal_type(dmlgpu.mean(x))
reveal_type(dmlgpu.logsumexp(x, axis=0))
reveal_type(dmlgpu.norm(x, ord=1))
reveal_type(dmlgpu.norm(x, ord=2, axis=0))
reveal_type(dmlgpu.reduce(x, ReduceFunction.SUM_SQUARE))
reveal_type(dmlgpu.mean(t))
reveal_type(dmlgpu.logsumexp(t, axis=0))
reveal_type(dmlgpu.norm(t, ord=1))
reveal_type(dmlgpu.norm(t, ord=2, axis=0))
reveal_type(dmlgpu.reduce(t, ReduceFunction.SUM_SQUARE, keepdims=True))
"""
NDARRAY, TENSOR = "numpy.ndarray[", "dmlgpu.front.tensor.Tensor"
EXPECTED_REVEALS = {9: NDARRAY, 10: NDARRAY, 11: NDARRAY, 12: NDARRAY, 13: NDARRAY, 14: NDARRAY, 15: NDARRAY,
                    16: TENSOR, 17: TENSOR, 18: TENSOR, 19: TENSOR, 20: TENSOR, 21: TENSOR, 22: TENSOR, 23: TENSOR,
                    24: TENSOR, 27: NDARRAY, 28: NDARRAY, 29: NDARRAY, 30: NDARRAY, 31: NDARRAY, 32: TENSOR, 33: TENSOR,
                    34: TENSOR, 35: TENSOR, 36: TENSOR}


def test_mypy_sees_numpy_in_numpy_out_and_tensor_in_tensor_out(tmp_path):
    result = _mypy(tmp_path, "in_out.py", IN_OUT_TYPES)
    reveals = {int(line.split(":")[1]): line.split("Revealed type is ")[1] for line in result.stdout.splitlines()
               if "Revealed type is" in line}
    assert sorted(reveals) == sorted(EXPECTED_REVEALS), result.stdout
    for line, wanted in EXPECTED_REVEALS.items():  # the one kind, never Any, never both
        assert (NDARRAY in reveals[line]) == (wanted == NDARRAY) and (TENSOR in reveals[line]) == (wanted == TENSOR), \
            (line, reveals[line])
    errors = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if ": error:" in line})
    assert errors == [25], result.stdout  # the fused function takes a Tensor, as it says


def test_the_package_shows_its_public_names_only():
    """`dir(dmlgpu)`: `__all__` and the version, no module the package imports to make them."""
    assert dir(dmlgpu) == sorted([*dmlgpu.__all__, "__version__"])
    for name in ("descs", "graph", "functions", "numpy_api", "reductions", "hamming", "debug_layer", "runtime"):
        assert name not in dir(dmlgpu)
    assert {"asarray", "empty", "zeros", "ones", "full", "sum", "top_k", "fuse", "HammingIndex"} <= set(dmlgpu.__all__)
    assert all(hasattr(dmlgpu, name) for name in dmlgpu.__all__)


def test_signatures_name_their_classes():
    """Annotations read as the class (`-> Tensor`), never a quoted string inside a string."""
    assert inspect.signature(dmlgpu.Tensor.from_numpy).return_annotation == "Tensor"
    for name in ("asarray", "empty", "zeros", "full"):
        assert inspect.signature(getattr(dmlgpu, name)).return_annotation == "Tensor"
