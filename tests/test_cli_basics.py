import subprocess
import sys


def test_version_does_not_import_heavy_modules():
    code = (
        "import sys; from click.testing import CliRunner; from topodoc.cli import main;"
        "r = CliRunner().invoke(main, ['--version']); print(r.output.strip());"
        "print(sorted(m for m in ('pynvml', 'pyudev', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "topodoc, version" in out
    assert out.strip().endswith("[]")


def test_python_dash_m_help_lists_commands():
    out = subprocess.run([sys.executable, "-m", "topodoc", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "Usage" in out.stdout
