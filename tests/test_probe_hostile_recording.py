"""A recording is input from strangers: every way a bundled example can be mutated (a symlink loop at a
PCI device or net interface, a JSON value of the wrong type anywhere, numbers too long for ``int()``, a
1 GiB file) gives exit 0/1/2 and, for an input error, one clear line; never a traceback (``run_cli``
raises any exception a real run would print as one)."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest
from conftest import REPO, gpu_box, load_tape, make_tree, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topodoc.probe.collect import collect
from topodoc.probe.host import MAX_READ, FsError, Host, RootFs, TapeNvml, TapeRunner

EXAMPLE = REPO / "fixtures" / "hosts" / "1s-2xgpu-desktop-pcie" / "recording.tar.gz"
FROM_COMMANDS = (("probe", "--json"), ("diagnose",), ("topo",), ("bandwidth",), ("diagram",))
HUGE = "9" * 5000
HUGE_TOKEN = "@@HUGE@@"  # replaced by a 5,000-digit JSON number after dumping (json.dumps refuses one)


def members() -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
    out = {}
    with tarfile.open(EXAMPLE) as tar:
        for info in tar:
            data = tar.extractfile(info).read() if info.isfile() else None
            out[info.name] = (info, data)
    return out


def write(path, items: dict[str, tuple[tarfile.TarInfo, bytes | None]]) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in items.values():
            if data is not None:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                tar.addfile(info)
    return str(path)


def run_from(path: str, *command: str):
    result = run_cli(*command, "--from", path)
    assert result.returncode in (0, 1, 2), (command, result.returncode, result.stderr[-500:])
    if result.returncode == 2 and command[0] != "diagnose":
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and len(lines[0]) < 1000, lines
    return result


def json_paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from json_paths(item, (*prefix, key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from json_paths(item, (*prefix, n))


def replaced(value, path, new):
    if not path:
        return new
    value[path[0]] = replaced(value[path[0]], path[1:], new)
    return value


WRONG = st.sampled_from(
    [None, True, False, 0, -1, 2**63, 1.5, float("inf"), float("nan"), "", "x" * 300, HUGE, HUGE_TOKEN,
     "0-50000000", [], [1, "a"], {}, {"a": [None]}, [[[[]]]]]
)


@pytest.mark.parametrize("device", ["fs/sys/bus/pci/devices/0000:05:00.0", "fs/sys/class/net/enp5s0"])
def test_a_symlink_loop_at_a_device_is_a_gap_for_every_from_command(tmp_path, device):
    items = members()
    info, _ = items[device]
    info.linkname = os.path.basename(device)  # the link points at itself: ELOOP
    path = write(tmp_path / "loop.tar.gz", items)
    probe = run_from(path, "probe", "--json")
    if probe.returncode == 0:  # (an extractor may also refuse a link to a link: exit 2, one line)
        gaps = json.loads(probe.stdout)["gaps"]
        machine_path = device.removeprefix("fs")
        loops = [g for g in gaps if g["source"] == machine_path and "symbolic links" in g["detail"]]
        assert len(loops) == 1, loops  # one gap for the device, not one per attribute
    for command in FROM_COMMANDS[1:]:
        run_from(path, *command)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_json_value_of_the_wrong_type_is_exit_0_1_or_2_never_a_traceback(tmp_path_factory, data):
    items = members()
    name = data.draw(st.sampled_from(["meta.json", "nvml.json", "commands.json"]))
    info, raw = items[name]
    document = json.loads(raw)
    paths = list(json_paths(document))
    where = data.draw(st.sampled_from(paths))
    text = json.dumps(replaced(document, where, data.draw(WRONG))).replace(f'"{HUGE_TOKEN}"', HUGE)
    items[name] = (info, text.encode())
    path = write(tmp_path_factory.mktemp("fuzz") / "mutated.tar.gz", items)
    run_from(path, *data.draw(st.sampled_from(FROM_COMMANDS)))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_huge_numbers_in_any_recorded_file_are_exit_0_1_or_2(tmp_path_factory, data):
    items = members()
    files = sorted(n for n, (_, d) in items.items() if d is not None and n.startswith("fs/"))
    name = data.draw(st.sampled_from(files))
    content = data.draw(st.sampled_from([
        HUGE, f"0-{HUGE}", f"TOTAL_ERR_COR {HUGE}", f"Node 0 MemTotal: {HUGE} kB", "\u00b2", "-" + HUGE,
        HUGE + ".5 GT/s", "1e999 GT/s", "nan", "f" * 5000,
    ]))
    items[name] = (items[name][0], (content + "\n").encode())
    path = write(tmp_path_factory.mktemp("huge") / "mutated.tar.gz", items)
    run_from(path, *data.draw(st.sampled_from(FROM_COMMANDS)))


def test_wrong_types_in_meta_and_tapes_are_one_line_naming_the_field(tmp_path):
    cases = {
        "meta.json": lambda d: d["unreadable"].append({"path": "/x", "reason": "missing", "detail": 5}),
        "commands.json": lambda d: d["commands"][0].update(stdout=["not", "text"]),
        "nvml.json": lambda d: d["calls"][0].update(code="zero"),
    }
    for name, mutate in cases.items():
        items = members()
        document = json.loads(items[name][1])
        mutate(document)
        items[name] = (items[name][0], json.dumps(document).encode())
        result = run_from(write(tmp_path / f"{name}.tar.gz", items), "probe")
        assert result.returncode == 2 and name in result.stderr and "must be" in result.stderr


def test_a_cpulist_no_machine_has_is_a_gap_not_gigabytes(tmp_path):
    items = members()
    node = "fs/sys/devices/system/node/node0/cpulist"
    items[node] = (items[node][0], b"0-50000000\n")
    result = run_from(write(tmp_path / "cpus.tar.gz", items), "probe", "--json")
    gaps = json.loads(result.stdout)["gaps"]
    assert result.returncode == 0 and any("cpulist of NUMA node 0" in g["what"] for g in gaps)
    assert run_from(write(tmp_path / "cpus.tar.gz", items), "diagnose").returncode in (0, 1)


def test_a_read_of_a_huge_file_is_refused_not_loaded(tmp_path):
    root = make_tree(tmp_path, {"/sys/small": "1\n"})
    with open(root / "sys" / "big", "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GiB of zeros that costs no disk
    fs = RootFs(root)
    with pytest.raises(FsError, match="longer than"):
        fs.read_bytes("/sys/big")
    assert len(fs.read_bytes("/sys/big", 4096)) == 4096
    assert len(fs.read_bytes("/sys/big", 1 << 30)) == MAX_READ  # a caller's limit is capped too


@pytest.fixture(scope="module")
def box_root(tmp_path_factory):
    files, links = gpu_box()
    return make_tree(tmp_path_factory.mktemp("box"), files, links)


@settings(max_examples=40, deadline=None)
@given(index=st.integers(0, 10**6), value=WRONG, deep=st.booleans())
def test_any_nvml_answer_of_the_wrong_type_is_a_gap_through_rules_and_reports(box_root, index, value, deep):
    """In process (no archive), so many more answers are tried: any call's value replaced (or one item
    inside it) and the snapshot still goes through the topology, every rule and both renderers."""
    from topodoc.codec import to_data
    from topodoc.report.probe import render_probe
    from topodoc.rules.engine import Facts, evaluate
    from topodoc.rules.registry import RULES
    from topodoc.topology import derive

    tape = load_tape("healthy-8xh100")
    calls = [c for c in tape["calls"] if c.get("code", 0) == 0]
    call = calls[index % len(calls)]
    inner = list(json_paths(call["value"]))
    where = inner[index % len(inner)] if deep else ()
    call["value"] = replaced(call["value"], where, value) if where or not deep else value
    snap = collect(Host(RootFs(box_root), TapeNvml(tape), TapeRunner({})))
    json.dumps(to_data(snap))
    render_probe(snap)
    report = evaluate(Facts(snapshot=snap, topology=derive(snap)), RULES)
    assert not report.errors, (call["fn"], where, value, report.errors)
