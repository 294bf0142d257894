"""The code ``@dataclass`` compiles for topodoc's classes, kept per user (:mod:`topodoc.dataclass_code`):
the same classes as without it, from a cache that is ignored when it is damaged, foreign or stale."""

from __future__ import annotations

import builtins
import dataclasses
import os
import subprocess
import sys
import types

import pytest

from topodoc import dataclass_code, usercache

SOURCE = "def __create_fn__(a):\n def f(self):\n  return a\n return f"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(dataclass_code, "_kept", {})
    monkeypatch.setattr(dataclass_code, "_used", {})
    monkeypatch.setattr(dataclass_code, "_dirty", set())
    return tmp_path / "topodoc"


def test_kept_code_is_the_code_compile_gives_and_is_read_back(cache):
    code = dataclass_code.code_of("topodoc.x", SOURCE)
    # what dataclasses' own exec compiles: no __future__ flag of the caller (this file has one)
    assert code == compile(SOURCE, "<string>", "exec", dont_inherit=True)
    assert code != compile(SOURCE, "<string>", "exec")
    dataclass_code._write_all()
    assert (cache / "dataclass-code-topodoc.x.marshal").is_file()
    dataclass_code._kept.clear()
    again = dataclass_code.code_of("topodoc.x", SOURCE)
    assert again is not code and again == code  # read from the file, not compiled
    assert dataclass_code._dirty == set()


@pytest.mark.parametrize("damage", [b"", b"garbage", None])
def test_a_damaged_or_foreign_file_is_ignored(cache, damage):
    dataclass_code.code_of("topodoc.x", SOURCE)
    dataclass_code._write_all()
    path = cache / "dataclass-code-topodoc.x.marshal"
    raw = path.read_bytes()
    if damage is None:  # another interpreter's file
        path.write_bytes(raw.replace(b"topodoc dataclass code 1", b"topodoc dataclass code 0"))
    else:
        path.write_bytes(raw[: len(dataclass_code._HEADER)] + damage)
    dataclass_code._kept.clear()
    dataclass_code._dirty.clear()
    dataclass_code.code_of("topodoc.x", SOURCE)
    assert dataclass_code._dirty == {"topodoc.x"}, "compiled again"


def test_only_topodoc_classes_go_through_the_cache(cache, monkeypatch):
    monkeypatch.setattr(dataclasses, "exec", builtins.exec, raising=False)  # removed again after the test
    dataclass_code.install()
    assert dataclasses.exec is dataclass_code._exec

    @dataclasses.dataclass(frozen=True)
    class Outside:  # this test module is not a topodoc module
        a: int = 1

    assert dataclass_code._used == {}
    assert Outside(2) == Outside(2) and repr(Outside()).endswith("Outside(a=1)")

    fake = types.ModuleType("topodoc.fake")
    monkeypatch.setitem(sys.modules, "topodoc.fake", fake)
    text = "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass Inside:\n    a: int = 1\n"
    exec(text, fake.__dict__)
    inside = fake.Inside
    assert dataclass_code._used["topodoc.fake"], "a topodoc module's class goes through the cache"
    assert inside(2) == inside(2) and repr(inside()) == "Inside(a=1)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        inside().a = 3


def test_a_command_run_twice_makes_the_same_classes_and_output(tmp_path):
    """A cold run writes the files, a warm one reads them: the same output, the same generated methods."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    probe = ("import sys, runpy; sys.argv = ['topodoc', 'probe', '--from', 'example:dgx-a100', '--json'];"
             "import atexit, topodoc.dataclass_code as d;"
             "atexit.register(lambda: sys.stderr.write('KEPT %d\\n' % sum(map(len, d._kept.values()))));"
             "runpy.run_module('topodoc', run_name='__main__')")
    runs = [subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
            for _ in range(2)]
    assert all(r.returncode in (0, 1) for r in runs), runs[0].stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.startswith("{")
    assert "KEPT 0" in runs[0].stderr and "KEPT 0" not in runs[1].stderr
    assert any(n.startswith("dataclass-code-topodoc.model") for n in os.listdir(tmp_path / "topodoc"))


def test_usercache_unusable_means_compiling(monkeypatch, tmp_path):
    monkeypatch.setattr(usercache, "folder", lambda: None)
    monkeypatch.setattr(dataclass_code, "_kept", {})
    monkeypatch.setattr(dataclass_code, "_used", {})
    monkeypatch.setattr(dataclass_code, "_dirty", set())
    assert dataclass_code.code_of("topodoc.y", SOURCE).co_filename == "<string>"
    dataclass_code._write_all()  # nothing to write to: no error


def test_the_off_switch_leaves_dataclasses_as_it_is(monkeypatch):
    import dataclasses

    from topodoc import dataclass_code

    before = dataclasses.__dict__.get("exec")
    try:
        dataclasses.__dict__.pop("exec", None)
        monkeypatch.setenv("TOPODOC_CODE_CACHE", "0")
        dataclass_code.install()
        assert "exec" not in dataclasses.__dict__
        monkeypatch.delenv("TOPODOC_CODE_CACHE")
        dataclass_code.install()
        assert dataclasses.exec is dataclass_code._exec
    finally:
        dataclasses.__dict__.pop("exec", None)
        if before is not None:
            dataclasses.exec = before
