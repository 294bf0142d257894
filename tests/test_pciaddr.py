import pytest
from hypothesis import given
from hypothesis import strategies as st

from topodoc import pciaddr


@pytest.mark.parametrize(
    "text",
    ["00000000:1A:00.0", "0000:1A:00.0", "0000:1a:00.0", "1a:00.0", "1a000", "0x1a000"],
)
def test_every_spelling_normalizes_to_sysfs(text):
    assert pciaddr.normalize(text) == "0000:1a:00.0"


def test_domain_is_kept():
    assert pciaddr.normalize("00000001:C3:1F.7") == "0001:c3:1f.7"


def test_garbage_raises_own_error():
    with pytest.raises(pciaddr.PciAddressError):
        pciaddr.normalize("mlx5_0")
    assert pciaddr.try_normalize("nope") is None


@given(st.integers(0, 0xFFFF), st.integers(0, 0xFF), st.integers(0, 0x1F), st.integers(0, 7))
def test_all_forms_round_trip(domain, bus, dev, fn):
    addr = pciaddr.PciAddress(domain, bus, dev, fn)
    assert pciaddr.parse(str(addr)) == addr
    assert pciaddr.parse(addr.nvml) == addr
    assert pciaddr.parse(addr.packed) == addr
