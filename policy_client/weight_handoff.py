"""Weights handed to a policy server on the same machine from memory: `POST /update_weights_from_tensor`.

The trainer lays its weights out, already in the dtype the server serves, in a few contiguous buffers (buckets),
and sends the server a manifest of each: where every tensor lies in the buffer. A CPU trainer writes each buffer to
a file in /dev/shm (shared memory: the server maps it, no disk is touched); a CUDA trainer keeps each buffer on its
GPU and sends its CUDA IPC handle (what torch.multiprocessing sends between processes), so the server copies the
tensors device to device. The sender keeps the buffers alive until every server has answered, then frees them.

SGLang's own `/update_weights_from_tensor` is the model (same path, `weight_version`, `flush_cache`,
`abort_all_requests`, and its `{"success", "message"}` answer); its body carries pickled tensors, which this engine
never unpickles: the manifest here is plain JSON, and a server opens only shared-memory files named by this module
(`SHM_PREFIX`) or CUDA IPC handles.
"""

from __future__ import annotations

import base64
import math
import mmap
import os
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from policy_client.wire import WEIGHT_VERSION_PATTERN

if TYPE_CHECKING:
    import torch

SHM_DIR = Path("/dev/shm")
SHM_PREFIX = "openclaw-rl-weights-"
"""Shared-memory files a server agrees to map: made by `pack`, under SHM_DIR, nothing else."""
ALIGN = 64
"""Every tensor starts at a multiple of this many bytes in its bucket (any dtype's alignment)."""
DTYPES = ("float32", "bfloat16", "float16", "float64", "int64", "int32", "uint8", "bool")


# ---- wire messages ------------------------------------------------------------------------------------------------
class TensorSlice(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512)
    """The parameter's Hugging Face name."""
    dtype: Literal["float32", "bfloat16", "float16", "float64", "int64", "int32", "uint8", "bool"]
    shape: list[Annotated[int, Field(ge=0)]] = Field(max_length=8)
    offset: int = Field(ge=0)
    """Byte offset of the tensor's first element in its bucket (contiguous, row-major)."""

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _itemsize(self.dtype)


class SharedMemoryBucket(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["shm"] = "shm"
    name: str = Field(pattern=rf"^{SHM_PREFIX}[A-Za-z0-9_.-]{{1,100}}$")
    """The file's name in /dev/shm."""
    nbytes: int = Field(ge=0)
    tensors: list[TensorSlice]


class CudaIpcBucket(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["cuda_ipc"] = "cuda_ipc"
    handle: dict[str, Any]
    """A uint8 CUDA buffer as torch.multiprocessing sends it (`cuda_handle`), JSON-encoded."""
    nbytes: int = Field(ge=0)
    tensors: list[TensorSlice]


Bucket = Annotated[SharedMemoryBucket | CudaIpcBucket, Field(discriminator="kind")]


class UpdateWeightsFromTensorRequest(BaseModel):
    """Body of POST /update_weights_from_tensor on the embedded engine."""

    model_config = ConfigDict(extra="forbid")

    buckets: list[Bucket] = Field(min_length=1)
    weight_version: str = Field(pattern=WEIGHT_VERSION_PATTERN)
    flush_cache: bool = True
    abort_all_requests: bool = False

    @field_validator("buckets")
    @classmethod
    def _slices_fit(cls, buckets: list) -> list:
        for b in buckets:
            for t in b.tensors:
                if t.offset % ALIGN or t.offset + t.nbytes > b.nbytes:
                    raise ValueError(f"tensor {t.name} does not lie inside its bucket ({b.nbytes} bytes)")
        return buckets


# ---- dtypes -------------------------------------------------------------------------------------------------------
_SIZES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8, "int64": 8, "int32": 4, "uint8": 1, "bool": 1}


def _itemsize(dtype: str) -> int:
    return _SIZES[dtype]


def _torch_dtype(name: str) -> torch.dtype:
    import torch

    return getattr(torch, name)


def _dtype_name(dtype: torch.dtype) -> str:
    name = str(dtype).removeprefix("torch.")
    if name not in _SIZES:
        raise ValueError(f"weights of dtype {name} cannot be handed over")
    return name


# ---- the sender ---------------------------------------------------------------------------------------------------
class Packed:
    """Buckets laid out by `pack`: `buckets` go in the request; `close()` frees the buffers (after the servers
    answered)."""

    def __init__(self) -> None:
        self.buckets: list[SharedMemoryBucket | CudaIpcBucket] = []
        self._files: list[Path] = []
        self._buffers: list[Any] = []

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.buckets)

    def close(self) -> None:
        for path in self._files:
            path.unlink(missing_ok=True)
        self._files.clear()
        self._buffers.clear()


def _layout(named: list[tuple[str, torch.Tensor]], dtype: torch.dtype | None) -> tuple[list[TensorSlice], int]:
    slices, offset = [], 0
    for name, t in named:
        d = dtype if dtype is not None and t.is_floating_point() else t.dtype
        s = TensorSlice(name=name, dtype=_dtype_name(d), shape=list(t.shape), offset=offset)
        slices.append(s)
        offset = -(-(offset + s.nbytes) // ALIGN) * ALIGN
    return slices, offset


def _fill(buffer: torch.Tensor, named: list[tuple[str, torch.Tensor]], slices: list[TensorSlice]) -> None:
    """Copy each tensor (cast to its slice's dtype) into a uint8 buffer."""
    for (_, t), s in zip(named, slices):
        view = buffer[s.offset : s.offset + s.nbytes].view(_torch_dtype(s.dtype)).view(s.shape)
        view.copy_(t.detach())


def pack(buckets: list[list[tuple[str, torch.Tensor]]], dtype: torch.dtype | None, device: torch.device) -> Packed:
    """`buckets` of named tensors (floating-point ones cast to `dtype` when given) as shared-memory files (CPU) or
    CUDA buffers on `device`, each kept until `Packed.close()`."""
    import torch

    packed = Packed()
    try:
        for named in buckets:
            slices, nbytes = _layout(named, dtype)
            if device.type == "cuda":
                buffer = torch.empty(nbytes, dtype=torch.uint8, device=device)
                _fill(buffer, named, slices)
                torch.cuda.current_stream(device).synchronize()  # the server reads it from another process
                packed._buffers.append(buffer)
                packed.buckets.append(CudaIpcBucket(handle=cuda_handle(buffer), nbytes=nbytes, tensors=slices))
                continue
            path = SHM_DIR / f"{SHM_PREFIX}{os.getpid()}-{uuid.uuid4().hex}"
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            packed._files.append(path)
            try:
                os.ftruncate(fd, max(nbytes, 1))
                with mmap.mmap(fd, max(nbytes, 1)) as m:
                    buffer = torch.frombuffer(m, dtype=torch.uint8, count=nbytes) if nbytes else None
                    if buffer is not None:
                        _fill(buffer, named, slices)
                        del buffer
            finally:
                os.close(fd)
            packed.buckets.append(SharedMemoryBucket(name=path.name, nbytes=nbytes, tensors=slices))
    except BaseException:
        packed.close()
        raise
    return packed


def handoff_possible(device: torch.device) -> str | None:
    """Why weights cannot be handed over from `device` on this machine (None: they can)."""
    if device.type == "cuda":
        return None
    if device.type != "cpu":
        return f"no in-memory hand-off from a {device.type} device"
    if not SHM_DIR.is_dir() or not os.access(SHM_DIR, os.W_OK):
        return f"{SHM_DIR} is not a writable shared-memory folder"
    return None


# ---- CUDA IPC handles as JSON ---------------------------------------------------------------------------------------
def cuda_handle(buffer: torch.Tensor) -> dict[str, Any]:
    """A contiguous uint8 CUDA tensor's IPC handle, as torch.multiprocessing.reductions.reduce_tensor makes it, in
    JSON (bytes in base64, classes and dtypes by name)."""
    from torch.multiprocessing.reductions import reduce_tensor

    _, args = reduce_tensor(buffer)
    (
        _cls,
        size,
        stride,
        offset,
        _storage_cls,
        _dtype,
        device,
        handle,
        storage_bytes,
        storage_offset,
        _requires_grad,
        ref_handle,
        ref_offset,
        event_handle,
        event_sync,
    ) = args
    return {
        "size": list(size),
        "stride": list(stride),
        "offset": offset,
        "device": device,
        "handle": _b64(handle),
        "storage_bytes": storage_bytes,
        "storage_offset": storage_offset,
        "ref_handle": _b64(ref_handle),
        "ref_offset": ref_offset,
        "event_handle": _b64(event_handle),
        "event_sync": bool(event_sync),
    }


def open_cuda_handle(h: dict[str, Any]) -> torch.Tensor:
    """The sender's uint8 buffer, mapped into this process (same GPU or a peer of it)."""
    import torch
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    return rebuild_cuda_tensor(
        torch.Tensor,
        torch.Size(h["size"]),
        tuple(h["stride"]),
        int(h["offset"]),
        torch.storage.UntypedStorage,
        torch.uint8,
        int(h["device"]),
        _unb64(h["handle"]),
        int(h["storage_bytes"]),
        int(h["storage_offset"]),
        False,
        _unb64(h["ref_handle"]),
        int(h["ref_offset"]),
        _unb64(h["event_handle"]),
        bool(h["event_sync"]),
    )


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


def _unb64(value: str | None) -> bytes | None:
    return None if value is None else base64.b64decode(value)


# ---- the receiver -------------------------------------------------------------------------------------------------
@contextmanager
def opened(bucket: SharedMemoryBucket | CudaIpcBucket) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """The bucket's tensors as views of the sender's buffer, valid inside the block (copy what you keep)."""
    import torch

    if isinstance(bucket, CudaIpcBucket):
        buffer = open_cuda_handle(bucket.handle)
        if buffer.numel() < bucket.nbytes:
            raise ValueError(f"the CUDA buffer holds {buffer.numel()} bytes, not {bucket.nbytes}")
        yield [(s.name, _view(buffer, s)) for s in bucket.tensors]
        return
    path = SHM_DIR / bucket.name
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a link planted under the name is refused, never followed
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path} is not a regular file")
        size = st.st_size
        if size < bucket.nbytes:
            raise ValueError(f"{path} holds {size} bytes, not {bucket.nbytes}")
        if bucket.nbytes == 0:
            yield []
            return
        # The mapping lives as long as a view of it does (torch keeps the buffer): never closed under a tensor.
        mapping = mmap.mmap(fd, bucket.nbytes, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    import warnings

    with warnings.catch_warnings():  # a read-only mapping: torch warns that the tensor is not writable
        warnings.simplefilter("ignore", UserWarning)
        buffer = torch.frombuffer(mapping, dtype=torch.uint8, count=bucket.nbytes)
    yield [(s.name, _view(buffer, s)) for s in bucket.tensors]


def _view(buffer: torch.Tensor, s: TensorSlice) -> torch.Tensor:
    return buffer[s.offset : s.offset + s.nbytes].view(_torch_dtype(s.dtype)).view(s.shape)
