"""Whether TPU chips are attached to this machine, and what libtpu must be told before it loads.

Imports nothing heavy: `trainer/__init__.py` calls it before TensorFlow is imported.

tensorflow-tpu loads libtpu as TensorFlow is imported (huggingface/transformers#28609), and
libtpu then reads its topology (TPU_ACCELERATOR_TYPE, TPU_WORKER_ID, TPU_WORKER_HOSTNAMES, ...)
from the GCE metadata server's `tpu-env` instance attribute, 30 tries per variable, unless
TPU_SKIP_MDS_QUERY is set, in which case it reads them from the environment only
(jax-ml/jax#11668; JAX skips the query the same way when no TPU is in use, jax-ml/jax#29069).
Off a TPU VM (a laptop, Cloud Build, a CPU or GPU machine, this package's image checks) that
query fails or hangs and the import never returns. There TensorFlow is told not to load libtpu
at all (TPU_LOAD_LIBRARY=0, read by TryAcquireTpuLock in TensorFlow/XLA's
stream_executor/tpu/tpu_initializer_helper.cc, before libtpu is initialised):
measured in the TPU image, the import then takes seconds, lists no phantom TPU_SYSTEM device and
prints none of libtpu's "could not determine TPU accelerator type / worker hostnames" lines.
TPU_SKIP_MDS_QUERY=1 is set beside it for any other loader of libtpu (the PJRT plugin path).

On a TPU VM, Vertex TPU jobs included (v2/v3 and v5e run on Compute Engine TPU VMs, whose
metadata holds `tpu-env`), nothing is set: libtpu loads and reads its topology from the metadata
server, as Google's TPU VM images expect.
"""

import glob
import os
from collections.abc import Mapping

# Google's PCI vendor id and the device ids of TPU chips, as JAX reads them to tell whether a
# machine has a TPU without loading libtpu (jax/_src/hardware_utils.py): v2/v3 share 0x0027.
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICES = {"0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076"}


def tpu_chips_attached(dev_dir: str = "/dev", sys_dir: str = "/sys") -> bool:
    """TPU chips on this machine: the device files libtpu opens (/dev/accel<N> on v2-v4,
    /dev/vfio/<N> on v5e and later), or TPU chips on the PCI bus, which a container sees in
    /sys even when its /dev holds no device files. /dev/accel/ as a *directory* is the generic
    Linux compute-accelerator class, and /dev/vfio/vfio the VFIO control node: neither is a TPU."""
    if glob.glob(os.path.join(dev_dir, "accel[0-9]*")) or glob.glob(os.path.join(dev_dir, "vfio", "[0-9]*")):
        return True
    for vendor in glob.glob(os.path.join(sys_dir, "bus", "pci", "devices", "*", "vendor")):
        device = os.path.join(os.path.dirname(vendor), "device")
        if _read(vendor) == GOOGLE_PCI_VENDOR and _read(device) in TPU_PCI_DEVICES:
            return True
    return False


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def asked_for_tpu(environ: Mapping[str, str]) -> bool:
    """A TPU named in the environment: TPU_NAME=local (a TPU VM whose device files are hidden,
    as `find_tpu` reads it) or the PJRT variables `trainer.submit train --tpu v5e` sets."""
    return (
        environ.get("TPU_NAME", "").strip() == "local"
        or environ.get("PJRT_DEVICE", "") == "TPU"
        or bool(environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", "").strip())
    )


def libtpu_environment(environ: Mapping[str, str], chips_attached: bool) -> dict:
    """Variables to add to `environ` before TensorFlow is imported. With no TPU attached or asked
    for: TPU_LOAD_LIBRARY=0 and TPU_SKIP_MDS_QUERY=1, so that importing tensorflow-tpu never
    waits on a metadata server. Nothing on a TPU VM, and nothing a user or platform set already
    (GKE's TPU device plugin sets TPU_SKIP_MDS_QUERY with the topology variables beside it)."""
    if chips_attached or asked_for_tpu(environ):
        return {}
    wanted = {"TPU_LOAD_LIBRARY": "0", "TPU_SKIP_MDS_QUERY": "1"}
    return {name: value for name, value in wanted.items() if name not in environ}
