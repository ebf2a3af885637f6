"""``nbytes(obj)``: the bytes of what an I/O region read or wrote, for objects whose type the
annotation could not know (``np.load`` gives an array or an ``NpzFile``, ``cv2.imread`` an
array or ``None``, a ``write(data)`` any buffer, a file object its position).

Where the type is known, dftpass writes the measure inline (``x.nbytes``,
``len(data)``); this function is the one place for the others, so the user's code gets one
call instead of a chain of ``isinstance`` tests, and every event gets a size that is a size:
a count of bytes, never ``-1``. It imports nothing (no numpy, no torch): it asks the object.
"""

from __future__ import annotations

#: how deep nested containers (a checkpoint's dicts of lists of tensors) are walked
MAX_DEPTH = 6


def nbytes(obj, _depth: int = 0) -> int:
    """The bytes ``obj`` holds: an array's or tensor's data, a buffer's or string's length, a
    decoded image's pixels (one byte per band), a data frame's columns, an ``.npz`` archive's
    members (their uncompressed sizes, nothing read), a file object's position (what was read
    or written from its start), a module's parameters and buffers, an optimizer's state, and
    the sum over a dict's values or a list's items. ``None``, and objects that hold none of
    these, hold 0 bytes."""
    if obj is None or _depth > MAX_DEPTH:
        return 0
    if isinstance(obj, (bytes, bytearray, str)):
        return len(obj)
    size = getattr(obj, "nbytes", None)  # numpy arrays and scalars, tensors, memoryviews, pyarrow
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    if isinstance(obj, dict):
        return sum(nbytes(v, _depth + 1) for v in obj.values())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return sum(nbytes(v, _depth + 1) for v in obj)
    kind = type(obj).__name__
    if kind == "NpzFile":  # np.load of an .npz: the archive's members, not read
        return sum(info.file_size for info in obj.zip.infolist())
    if hasattr(obj, "getbands") and hasattr(obj, "width"):  # a PIL image
        return obj.width * obj.height * len(obj.getbands())
    if hasattr(obj, "memory_usage") and callable(obj.memory_usage):  # pandas
        usage = obj.memory_usage(index=True)
        return int(usage.sum() if hasattr(usage, "sum") else usage)
    if callable(getattr(obj, "parameters", None)) and callable(getattr(obj, "buffers", None)):  # a torch module
        return sum(nbytes(t, _depth + 1) for t in (*obj.parameters(), *obj.buffers()))
    if isinstance(getattr(obj, "state", None), dict) and hasattr(obj, "param_groups"):  # a torch optimizer
        return nbytes(list(obj.state.values()), _depth + 1)
    if callable(getattr(obj, "tell", None)) and callable(getattr(obj, "seekable", None)):  # a file object
        try:
            return obj.tell() if obj.seekable() else 0
        except (OSError, ValueError):  # closed, or a stream
            return 0
    return 0
