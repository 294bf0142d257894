"""/dev/shm as pasted (df -h, mount, /proc/mounts) and the shm-too-small rule, on the real pastes of
fixtures/text/shm (sources in fixtures/text/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topodoc.parsers import shm
from topodoc.rules import registry
from topodoc.rules.engine import Facts, evaluate
from topodoc.text.inputs import read_inputs

ROOT = Path(__file__).resolve().parent.parent
PASTES = ROOT / "fixtures/text/shm"


def _read(name: str) -> shm.ShmText:
    items = [i for i in read_inputs([str(PASTES / name)]) if i.kind == "shm"]
    assert len(items) == 1 and items[0].error is None
    return items[0].parsed


def _findings(parsed: shm.ShmText):
    facts = Facts(texts=(("paste.txt", "shm", parsed),))
    return evaluate(facts, [registry.get("shm-too-small")]).findings


@pytest.mark.parametrize(
    ("name", "source", "size", "line"),
    [
        ("docker-busybox-df-h-64m.txt", "shm", 64 << 20, 9),  # busybox "64.0M"
        ("docker-tmpfs-df-h-64m-prompt.txt", "tmpfs", 64 << 20, 7),
        ("drone-ci-df-h-log-noise.txt", "shm", 64 << 20, 19),  # CI log lines between the rows
        ("host-126g-df-h.txt", "tmpfs", 126 << 30, 4),
        ("alpine-df-grep-comma-decimal.txt", "tmpfs", int(7.8 * (1 << 30)), 2),  # "7,8G"
    ],
)
def test_df_rows_give_size_use_and_line(name, source, size, line):
    parsed = _read(name)
    (mount,) = parsed.mounts
    assert (mount.origin, mount.source, mount.size_bytes, mount.line) == ("df", source, size, line)
    assert mount.mountpoint == "/dev/shm" and mount.use_pct is not None


def test_a_mount_line_without_size_gives_no_size():
    (mount,) = _read("vm-mount-grep-shm-no-size.txt").mounts
    assert mount.origin == "mount" and mount.fstype == "tmpfs" and mount.size_bytes is None
    assert mount.options == ("rw", "nosuid", "nodev", "relatime")
    assert not _findings(_read("vm-mount-grep-shm-no-size.txt"))


def test_proc_mounts_and_mount_size_option_and_wrapped_df_row():
    """Lines in the layouts the kernel and df print (no public paste of these three was found): a
    /proc/mounts line with the runtime's /dev/shm options (source shm, nosuid,noexec,nodev, size=65536k, as
    in the OCI spec runc generates, e.g. NVIDIA/nvidia-container-toolkit test/input/test_spec.json),
    ``mount`` with size=1g, and a df row wrapped after a long source name (GNU df without -P)."""
    text = (
        "shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n"
        "overlay / overlay rw,relatime,lowerdir=/a:/b 0 0\n"
        "tmpfs on /run/shm type tmpfs (rw,nosuid,nodev,size=1g)\n"
        "Filesystem     1K-blocks  Used Available Use% Mounted on\n"
        "/dev/mapper/very-long-volume-name\n"
        "                   65536 65536         0 100% /dev/shm\n"
    )
    parsed = shm.parse(text)
    first, second, third = parsed.mounts
    assert (first.origin, first.size_bytes, first.line) == ("proc-mounts", 64 << 20, 1)
    assert (second.origin, second.size_bytes, second.mountpoint) == ("mount", 1 << 30, "/run/shm")
    assert (third.source, third.size_bytes, third.use_pct, third.line) == (
        "/dev/mapper/very-long-volume-name", 64 << 20, 100, 5)
    assert parsed.others == 1


def test_no_shm_line_is_an_error_not_an_empty_parse():
    with pytest.raises(shm.ShmParseError):
        shm.parse("Filesystem Size Used Avail Use% Mounted on\n/dev/sda1 47G 6.6G 38G 15% /\n")
    assert not shm.looks_like(["/dev/sda1 47G 6.6G 38G 15% /", "tmpfs on /run type tmpfs (rw)"])


@pytest.mark.parametrize(
    ("name", "fires"),
    [
        ("docker-busybox-df-h-64m.txt", True),
        ("docker-tmpfs-df-h-64m-prompt.txt", True),
        ("drone-ci-df-h-log-noise.txt", True),
        ("host-126g-df-h.txt", False),
        ("alpine-df-grep-comma-decimal.txt", False),
    ],
)
def test_rule_fires_on_dockers_64m_and_cites_the_row(name, fires):
    found = _findings(_read(name))
    assert bool(found) is fires
    if fires:
        (finding,) = found
        assert "64 MiB" in finding.message and "9.2 MB" in finding.message
        assert finding.evidence[0].where.startswith("paste.txt:") and "/dev/shm" in finding.evidence[0].value


def test_rule_reports_a_nearly_full_large_shm():
    """The host row of kubernetes/kubernetes#76263 with Used/Avail/Use% changed to a full /dev/shm (no public
    paste of a full one was found): a large /dev/shm that is 96% used is reported, with what is free."""
    row = "tmpfs   126G  121G  5.0G  96% /dev/shm"
    (finding,) = _findings(shm.parse(row))
    assert "96% used" in finding.message and "5.0 GiB free" in finding.message
    assert not _findings(shm.parse(row.replace("96%", "89%")))


def test_a_multi_command_paste_reads_the_df_region_as_shm():
    from topodoc.text.inputs import _by_region, parse_text

    text = ("$ ulimit -a | grep locked\nmax locked memory       (kbytes, -l) 64\n$ df -h /dev/shm\n"
            "Filesystem Size Used Avail Use% Mounted on\nshm 64M 0 64M 0% /dev/shm\n")
    parts = _by_region(parse_text("x.txt", text))
    assert [p.kind for p in parts] == ["ulimit", "shm"]
    assert parts[1].parsed.mounts[0].line == 5


def test_a_bare_shm_segment_failure_line_is_read_by_the_catalogue(tmp_path):
    """The line as quoted in fal-ai-community/video-diffusion-speedrun#2, without NCCL's prefix: its
    catalogue example makes the literal a scan gate, so the log analyzer reads it in any text."""
    from topodoc import catalogue
    from topodoc.parsers.nccl_log import analyze

    line = "Error while creating shared memory segment /dev/shm/nccl-pZafXL (size 7340384)"
    assert line in {ex.line for sig in catalogue.signatures() for ex in sig.examples}
    path = tmp_path / "paste.txt"
    path.write_text("tmpfs            64M     0   64M   0% /dev/shm\n" + line + "\n")
    text = str(analyze([str(path)], catalogue.scan_literals()))
    assert "shm-create-segment-failed" in text
