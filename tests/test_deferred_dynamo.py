"""`grader.worker.deferred_dynamo`: torch._dynamo is imported only when something compiles, and
deferring it changes no number. Each case runs in a fresh Python: which torch._dynamo a process
holds is process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Every optimizer of torch.optim (but SparseAdam: dense gradients), plain and foreach, with a
# scheduler, a closure, a state_dict round trip and a new parameter group: the bytes of the
# weights after four steps, and what torch._dynamo is in the process.
TRAIN_ALL = """
import hashlib, sys, torch
if sys.argv[1] == "defer":
    from grader.worker.deferred_dynamo import defer
    defer()
torch.set_num_threads(1)
names = sorted(n for n, c in vars(torch.optim).items() if isinstance(c, type)
               and issubclass(c, torch.optim.Optimizer) and n not in ("Optimizer", "SparseAdam"))
digest = hashlib.sha256()
for name in names:
    for options in ({}, {"foreach": True}):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        try:
            opt = getattr(torch.optim, name)(model.parameters(), lr=0.01, **options)
        except (TypeError, ValueError):  # no foreach, or other parameters (Muon: 2-D only)
            continue
        scheduler = torch.optim.lr_scheduler.StepLR(opt, 2, gamma=0.5)
        x, y = torch.randn(16, 4), torch.randn(16, 1)
        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        for _ in range(4):
            opt.step(closure)
            scheduler.step()
        opt.load_state_dict(opt.state_dict())
        opt.add_param_group({"params": [torch.nn.Parameter(torch.zeros(2))]})
        for p in model.parameters():
            digest.update(p.detach().numpy().tobytes())
print(len(names), digest.hexdigest(), type(sys.modules.get("torch._dynamo")).__name__)
"""


def run(code: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_optimizer_trains_to_the_same_bits_without_importing_torch_dynamo():
    count, deferred, module = run(TRAIN_ALL, "defer").split()
    count_plain, plain, module_plain = run(TRAIN_ALL, "plain").split()
    assert int(count) >= 10 and count == count_plain
    assert deferred == plain
    assert module == "DeferredDynamo"  # never needed
    assert module_plain == "module"  # torch itself imports it on the first step


def test_compiling_loads_the_real_module_and_torch_disables_its_functions_again():
    """After the stand-in let optimizer methods run undisabled, `torch.compile` loads the real
    torch._dynamo; the cached answers are cleared, so torch disables those methods as always."""
    out = run("""
        import sys, torch
        from grader.worker.deferred_dynamo import defer, deferred
        defer()
        p = torch.nn.Parameter(torch.ones(2))
        opt = torch.optim.SGD([p], lr=0.5)
        opt.zero_grad(); p.sum().backward(); opt.step()
        zero_grad = torch.optim.Optimizer.zero_grad.__wrapped__
        print(deferred(), zero_grad.__dict__.get("__dynamo_disable") is zero_grad)
        f = torch.compile(lambda x: x * 2 + 1, backend="eager")
        print(f(torch.ones(2)).tolist(), deferred(), type(sys.modules["torch._dynamo"]).__name__,
              torch._dynamo is sys.modules["torch._dynamo"])
        print("__dynamo_disable" in zero_grad.__dict__)
        opt.zero_grad(); p.sum().backward(); opt.step()
        print(p.tolist(), zero_grad.__dict__["__dynamo_disable"] is not zero_grad)
    """)
    assert out.splitlines() == ["True True", "[3.0, 3.0] False module True", "False",
                                "[0.0, 0.0] True"]


def test_any_other_use_of_torch_dynamo_is_the_real_one():
    """A student's own `torch._dynamo.disable` decorator, or any other name, is the real one."""
    out = run("""
        import sys, torch
        from grader.worker.deferred_dynamo import defer
        defer()
        import torch._dynamo
        @torch._dynamo.disable
        def f(x):
            return x + 1
        print(f(1), type(sys.modules["torch._dynamo"]).__name__, torch._dynamo.config.__name__)
    """)
    assert out == "2 module torch._dynamo.config"


def test_defer_leaves_a_real_torch_dynamo_alone():
    out = run("""
        import sys, torch, torch._dynamo
        real = sys.modules["torch._dynamo"]
        from grader.worker.deferred_dynamo import defer, deferred
        defer()
        print(sys.modules["torch._dynamo"] is real, deferred())
    """)
    assert out == "True False"


# torch.func's transforms, a reference's tools: each enters compiled_autograd._disable() around
# its torch.autograd.grad. The bytes of what they compute, and what torch._dynamo is after.
FUNC_ALL = """
import hashlib, sys, torch
if sys.argv[1] == "defer":
    from grader.worker.deferred_dynamo import defer
    defer()
from torch.func import grad, hessian, jacfwd, jacrev, vjp, vmap
torch.manual_seed(0)
x, w = torch.randn(5, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)
f = lambda t: torch.tanh(w @ t).pow(2).sum()
out, pullback = vjp(lambda t: torch.sin(w @ t), x)
results = [out, *pullback(torch.ones(3, dtype=torch.float64)), grad(f)(x), jacrev(torch.sin)(x),
           jacfwd(torch.sin)(x), hessian(f)(x), vmap(grad(f))(torch.randn(4, 5).double())]
digest = hashlib.sha256()
for r in results:
    digest.update(r.detach().numpy().tobytes())
print(digest.hexdigest(), type(sys.modules.get("torch._dynamo")).__name__)
"""


def test_torch_func_computes_the_same_bits_without_importing_torch_dynamo():
    deferred, module = run(FUNC_ALL, "defer").split()
    plain, module_plain = run(FUNC_ALL, "plain").split()
    assert deferred == plain
    assert module == "DeferredDynamo" and module_plain == "module"


def test_compiled_autograd_is_the_real_one_once_loaded():
    """Any other name of torch._dynamo.compiled_autograd loads the real module; `_disable()`
    then is the real one's, through a reference taken before."""
    out = run("""
        import sys, torch
        from grader.worker.deferred_dynamo import defer, deferred
        defer()
        early = torch._dynamo.compiled_autograd
        with early._disable():
            pass
        print(deferred(), early.compiled_autograd_enabled, deferred())
        with early._disable():
            print(sys.modules["torch._dynamo.compiled_autograd"].active_disable_ctx)
    """)
    assert out.splitlines() == ["True False False", "True"]
