"""The package tells NumPy's OpenBLAS threads to stop spinning before NumPy loads OpenBLAS.

(The speed effect is measured in benchmarks/; here we check that the setting is in place.)
"""
import os
import subprocess
import sys


def _run(code, **env):
    full = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    full.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_importing_saliency_first_sets_the_openblas_timeout_before_numpy_loads():
    code = ("import sys; import saliency, os; "
            "print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))")
    assert _run(code) == "4"


def test_a_value_the_user_set_is_kept():
    assert _run("import saliency, os; print(os.environ['OPENBLAS_THREAD_TIMEOUT'])", OPENBLAS_THREAD_TIMEOUT="1") == "1"


def test_the_setting_comes_before_numpy_is_imported():
    # record the variable at the moment NumPy is imported, through an import hook
    code = """
import builtins, os
seen = []
real_import = builtins.__import__
def spy(name, *args, **kwargs):
    if name == "numpy" and not seen:
        seen.append(os.environ.get("OPENBLAS_THREAD_TIMEOUT"))
    return real_import(name, *args, **kwargs)
builtins.__import__ = spy
import saliency
print(seen[0])
"""
    assert _run(code) == "4"
