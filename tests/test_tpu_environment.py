"""What the trainer tells libtpu before TensorFlow loads it: off a TPU VM, not to load (and never
to ask a metadata server); on a TPU VM, nothing, so libtpu reads its topology as Google's TPU VMs
expect."""

import os
import subprocess
import sys

import pytest

from trainer.tpu import libtpu_environment, tpu_chips_attached

OFF_TPU = {"TPU_LOAD_LIBRARY": "0", "TPU_SKIP_MDS_QUERY": "1"}


@pytest.mark.parametrize(
    "entries,attached",
    [
        ([], False),
        (["accel0"], True),  # TPU v2-v4 VM
        (["vfio/0", "vfio/vfio"], True),  # TPU v5e and later
        (["vfio/vfio"], False),  # the VFIO control node alone
        (["accel/accel0"], False),  # the Linux compute-accelerator class, not a TPU
    ],
)
def test_tpu_chips_are_the_device_files_libtpu_opens(tmp_path, entries, attached):
    for entry in entries:
        (tmp_path / entry).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / entry).touch()
    assert tpu_chips_attached(str(tmp_path), sys_dir=str(tmp_path / "sys")) is attached


def pci_device(sys_dir, slot, vendor, device):
    folder = sys_dir / "bus" / "pci" / "devices" / slot
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")


@pytest.mark.parametrize(
    "vendor,device,attached",
    [
        ("0x1ae0", "0x0027", True),  # TPU v2/v3
        ("0x1ae0", "0x0063", True),  # TPU v5e
        ("0x1ae0", "0x0042", False),  # another Google device (gVNIC)
        ("0x10de", "0x0027", False),  # another vendor's device with the same id
    ],
)
def test_tpu_chips_on_the_pci_bus_count_without_device_files(tmp_path, vendor, device, attached):
    pci_device(tmp_path / "sys", "0000:00:04.0", vendor, device)
    assert tpu_chips_attached(str(tmp_path / "dev"), sys_dir=str(tmp_path / "sys")) is attached


def test_off_a_tpu_vm_libtpu_is_not_loaded_and_no_metadata_server_is_asked():
    assert libtpu_environment({}, chips_attached=False) == OFF_TPU


def test_on_a_tpu_vm_libtpu_reads_its_topology_from_the_metadata_server():
    assert libtpu_environment({}, chips_attached=True) == {}


@pytest.mark.parametrize(
    "environ", [{"TPU_NAME": "local"}, {"PJRT_DEVICE": "TPU"}, {"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": "/lib/libtpu.so"}]
)
def test_a_tpu_asked_for_in_the_environment_is_loaded(environ):
    assert libtpu_environment(environ, chips_attached=False) == {}


def test_what_the_user_or_platform_set_is_kept():
    # GKE's TPU device plugin sets TPU_SKIP_MDS_QUERY=true with the topology variables.
    assert libtpu_environment({"TPU_SKIP_MDS_QUERY": "true"}, chips_attached=False) == {"TPU_LOAD_LIBRARY": "0"}
    assert libtpu_environment({"TPU_LOAD_LIBRARY": "1"}, chips_attached=False) == {"TPU_SKIP_MDS_QUERY": "1"}


def test_importing_the_trainer_sets_them_before_tensorflow_is_imported():
    code = (
        "import os, sys, trainer; "
        "print(os.environ.get('TPU_LOAD_LIBRARY'), os.environ.get('TPU_SKIP_MDS_QUERY'), 'tensorflow' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k not in OFF_TPU}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    expected = "None None" if tpu_chips_attached() else "0 1"
    assert result.stdout.split() == [*expected.split(), "False"]
