"""I/O handles: what a name opened, and the reads that go through it."""

from __future__ import annotations

import re

from dftpass.core.summary import StmtPath
from dftpass.core.values import kind


#: calls that open something to read from later, by qualified name -> the handle's kind. A PIL
#: image is lazy: ``Image.open`` reads the header, the pixels come with ``convert``/``load``
OPENERS: dict[str, str] = {
    "open": "file",
    "io.open": "file",
    "h5py.File": "h5file",
    "numpy.memmap": "memmap",
    "zarr.open": "zarr",
    "zarr.open_array": "zarr",
    "PIL.Image.open": "image",
}
#: a plain name or ``self`` attribute
HANDLE_NAME = re.compile(r"^(self\.)?[A-Za-z_]\w*$")


def call_chain(text: str | None) -> tuple[str, tuple[str, ...], int] | None:
    """``np.load().astype()[]`` -> (``np.load``, (``astype``,), 1): the first call, the
    methods called on its result, the subscripts after them. None if ``text`` is no call."""
    if not text:
        return None
    subs = 0
    while text.endswith("[]"):
        text, subs = text[:-2], subs + 1
    if not text.endswith("()"):
        return None
    base, *methods = text[:-2].split("().")
    return base, tuple(methods), subs


class Handles:
    """What a name holds in one function, among the handles of :data:`OPENERS`: from value flow
    (locals, ``self`` attributes set anywhere in the class), from a local ``ds = f['name']``
    (an h5py data set), or from the one ``with`` item that opens something around a statement
    that uses a name the function never binds (``with open(p, 'rb') as f:``)."""

    def __init__(self, graph, function_id: str) -> None:
        self.graph = graph
        self.function_id = function_id
        self.fs, self.fn = graph.functions[function_id]

    def kind(self, name: str, path: StmtPath, depth: int = 3) -> str | None:
        graph, fs, fn = self.graph, self.fs, self.fn
        kinds = set()
        for origin in graph.values.of(self.function_id, name) if graph.values is not None else ():
            if origin.startswith("ext:"):
                chain = call_chain(origin[4:])
                if chain is not None and not chain[1] and not chain[2]:
                    kinds.add(OPENERS.get(chain[0]) or OPENERS.get(graph.qualify(fs, chain[0])))
        local = [a for a in fn.assigns if a.target == name]
        for a in local:
            chain = call_chain(a.value)
            if chain is not None and not chain[1] and not chain[2]:
                qualified = graph.qualify(fs, chain[0])
                if qualified == "numpy.load" and any(k == "mmap_mode" and v not in (None, "None")
                                                     for k, v in a.call_keywords):
                    kinds.add("memmap")
                else:
                    kinds.add(OPENERS.get(qualified))
            elif a.value and a.value.endswith("[]") and depth:
                holder = a.value[:-2]
                if HANDLE_NAME.match(holder) and self.kind(holder, a.stmt, depth - 1) == "h5file":
                    kinds.add("h5dataset")
                else:
                    kinds.add(None)
            else:
                kinds.add(None)
        if not local and not kinds and not name.startswith("self.") and name not in fn.params:
            kinds.add(self._with_bound(path))
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    def _with_openers(self, path: StmtPath) -> list[tuple[str, tuple[str | None, ...], tuple]]:
        """(handle kind, args, keywords) of the ``with`` items around ``path`` that open something."""
        found = []
        for call in self.fn.calls:
            if call.stmt_kind == "with" and len(call.stmt) < len(path) and path[:len(call.stmt)] == call.stmt:
                chain = call_chain(call.callee + "()")
                kind = OPENERS.get(self.graph.qualify(self.fs, chain[0])) if chain else None
                if kind:
                    found.append((kind, call.args, call.keywords))
        return found

    def _with_bound(self, path: StmtPath) -> str | None:
        """The handle the ``with`` blocks around ``path`` open, if exactly one does."""
        found = {kind for kind, _, _ in self._with_openers(path)}
        return found.pop() if len(found) == 1 else None

    def file_mode(self, name: str, path: StmtPath) -> str | None:
        """The mode (``"r"``, ``"wb"``...) of the file ``name`` holds, when a local ``open(...)``
        or the one ``with open(...)`` around ``path`` says it with a literal; None otherwise."""
        if self.kind(name, path) != "file":
            return None
        local = [(a.call_args, a.call_keywords) for a in self.fn.assigns if a.target == name]
        if not local and not name.startswith("self.") and name not in self.fn.params:
            local = [(args, keywords) for kind, args, keywords in self._with_openers(path) if kind == "file"]
        if len(local) != 1:
            return None
        args, keywords = local[0]
        mode = args[1] if len(args) > 1 else dict(keywords).get("mode", "'r'")
        if not mode or len(mode) < 3 or mode[0] not in "'\"" or mode[-1] != mode[0]:
            return None
        return mode[1:-1]
