"""autotune.torch.matmul against torch.matmul: on CPU tensors through the library's default
device (OpenCL on PoCL in CI), and on CUDA tensors on PyTorch's stream when a CUDA GPU is there.
Skipped without PyTorch (CI installs none: PyPI's build needs CUDA's libraries)."""

import pytest

torch = pytest.importorskip("torch")
import autotune  # noqa: E402
import autotune.torch as att  # noqa: E402

SHAPES = [(33, 17, 29), (1, 7, 5), (64, 3, 100)]


@pytest.fixture(autouse=True)
def small_tunes(tmp_path, monkeypatch):
    # A fresh database and a tiny budget for every tune the calls start.
    monkeypatch.setenv("AUTOTUNE_DB", str(tmp_path / "db"))
    monkeypatch.setenv("AUTOTUNE_BUDGET", "2")
    monkeypatch.setattr(autotune, "_default", None)
    monkeypatch.setattr(att, "_contexts", {})
    monkeypatch.setattr(att, "_kernels", {})


def default_device_or_skip():
    try:
        autotune._context(None)
    except autotune.Error as e:
        pytest.skip(f"no device: {e}")


def check(a, b, tol):
    before = att.stats()["autotune"]
    c = att.matmul(a, b)
    assert att.stats()["autotune"] == before + 1, "went to torch.matmul"
    ref = torch.matmul(a.float(), b.float())
    assert c.shape == ref.shape and c.dtype == a.dtype and c.device == a.device
    torch.testing.assert_close(c.float(), ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_cpu_matches_torch(m, n, k):
    default_device_or_skip()
    g = torch.Generator().manual_seed(m * n * k)
    a, b = torch.rand(m, k, generator=g) - 0.5, torch.rand(k, n, generator=g) - 0.5
    check(a, b, 1e-4)
    # Transposed views are read as stored (layouts tn, nt, tt), not copied.
    check(torch.rand(k, m, generator=g).t(), b, 1e-4)
    check(a, torch.rand(n, k, generator=g).t(), 1e-4)
    check(torch.rand(k, m, generator=g).t(), torch.rand(n, k, generator=g).t(), 1e-4)


def test_cpu_out_and_fallbacks():
    default_device_or_skip()
    a, b = torch.rand(9, 4) - 0.5, torch.rand(4, 6) - 0.5
    out = torch.full((9, 6), float("nan"))
    assert att.matmul(a, b, out=out) is out
    torch.testing.assert_close(out, a @ b, rtol=1e-4, atol=1e-4)
    before = att.stats()
    # Not the library's GEMM: batched, a vector, integers, float64, autograd, empty.
    cases = [(torch.rand(2, 9, 4), torch.rand(4, 6)), (a, torch.rand(4)),
             (torch.ones(3, 4, dtype=torch.int32), torch.ones(4, 2, dtype=torch.int32)),
             (a.double(), b.double()), (a.clone().requires_grad_(), b), (torch.rand(0, 4), b)]
    for x, y in cases:
        got, want = att.matmul(x, y), torch.matmul(x, y)
        assert torch.equal(got, want)
    assert att.stats()["torch"] == before["torch"] + len(cases)
    assert att.stats()["autotune"] == before["autotune"]


cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for PyTorch")


@cuda
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-3), (torch.float16, 2e-2),
                                       (torch.bfloat16, 5e-2)])
@pytest.mark.parametrize("m,n,k", SHAPES + [(128, 256, 64)])
def test_cuda_matches_torch(dtype, tol, m, n, k):
    g = torch.Generator(device="cuda").manual_seed(m + n + k)
    a = (torch.rand(m, k, device="cuda", generator=g) - 0.5).to(dtype)
    b = (torch.rand(k, n, device="cuda", generator=g) - 0.5).to(dtype)
    check(a, b, tol)
    check(a, (torch.rand(n, k, device="cuda", generator=g) - 0.5).to(dtype).t(), tol)


@cuda
def test_cuda_runs_on_the_current_stream():
    a = torch.rand(256, 128, device="cuda") - 0.5
    b = torch.rand(128, 192, device="cuda") - 0.5
    att.matmul(a, b)  # tuned here, on the default stream
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        s.wait_stream(torch.cuda.current_stream())
        torch.cuda._sleep(20_000_000)  # the stream is busy: a launch elsewhere would race
        x = a * 2
        c = att.matmul(x, b)
        d = c + 1
    torch.cuda.synchronize()
    torch.testing.assert_close(d, (a * 2) @ b + 1, rtol=1e-3, atol=1e-3)
