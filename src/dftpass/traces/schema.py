"""One trace event as decoded from a line: typed, and the same for every format version.

Decoding is the cost of reading a trace (~0.6 us of the ~1.2 us per event), so the common
case is a single typed ``msgspec`` decode that skips the keys the analysis never reads
(``docs/traces.md`` has the measurements). ``strict=False`` already turns numeric strings
into numbers (the dlio-profiler era wrote ``"ts":"1698080323775554"``). Anything the typed
decode refuses (``ph`` letters of 1.x, a stray non-numeric ``ret``) goes through
:func:`normalize`, which repairs what it can; only lines that are not a JSON object at all
count as malformed.

Absent numbers use sentinels, not None, so whole batches turn into numpy arrays in one
call: ``ret == -1`` and ``image_size < 0`` mean "not given" (a failed call returns -1 and
moves no bytes either).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

#: dftracer 1.x / Chrome trace phase letters -> the integer ``ph`` of 2.x
PHASE_LETTERS = {"X": 1, "C": 2, "M": 4}
COMPLETE, COUNTER, AGGREGATED, METADATA = 1, 2, 3, 4


class Args(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` keys the analysis reads; a missing ``args`` is ``Args()`` (all absent)."""

    ret: int = -1
    image_size: float = -1.0
    ppid: int = -1
    # an ``.iter`` event's 1-based place in its loop (1: the first batch of an epoch)
    count: int = -1
    # metadata lines (ph 4): name -> value
    name: Any = None
    value: Any = None
    # dlio-profiler era: plain host name on every event
    hostname: Any = None
    # aggregated records (ph 3)
    dft_cnt: int = -1
    dur: int = -1
    dur_sum: int = -1


class FullArgs(Args, frozen=True, gc=False):
    """:class:`Args` plus the hashes that tie an event to its host and file."""

    hhash: Any = None
    fhash: Any = None


class Event(msgspec.Struct, frozen=True, gc=False):
    """One trace record. ``ts``/``dur`` are in the file's time metric (see ``TraceMeta``)."""

    name: str = ""
    cat: str = ""
    pid: int = 0
    tid: int = 0
    ts: int = 0
    dur: int = 0
    ph: int = COMPLETE
    id: int = -1
    args: FullArgs = FullArgs()


class LeanEvent(msgspec.Struct, frozen=True, gc=False):
    """What the summary reads of an event: decoding ``tid``, ``id`` and the 16-character hashes
    of every event costs more than all the aggregation (``docs/traces.md``)."""

    name: str = ""
    cat: str = ""
    pid: int = 0
    ts: int = 0
    dur: int = 0
    ph: int = COMPLETE
    args: Args = Args()


class Schema(NamedTuple):
    """An event type and its decoders (one line / a JSON array of lines)."""

    type: type
    one: msgspec.json.Decoder
    batch: msgspec.json.Decoder


def _schema(event_type: type) -> Schema:
    return Schema(event_type, msgspec.json.Decoder(event_type, strict=False),
                  msgspec.json.Decoder(list[event_type], strict=False))


FULL = _schema(Event)
LEAN = _schema(LeanEvent)
_ANY_DECODER = msgspec.json.Decoder()

_INT_FIELDS = ("pid", "tid", "ts", "dur", "id")
_INT_ARGS = ("ret", "ppid", "dft_cnt", "dur", "dur_sum")


def _number(value: Any) -> int | float | None:
    """A number from a JSON number or numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return None
    return None


def _phase(value: Any) -> int | None:
    if isinstance(value, str):
        value = PHASE_LETTERS.get(value.strip().upper(), value)
    number = _number(value)
    return int(number) if number is not None else None


def normalize(raw: bytes, event_type: type = Event) -> Any:
    """Decode a line the typed decoder refused into ``event_type``; None if it is not a JSON
    object (malformed)."""
    try:
        data = _ANY_DECODER.decode(raw)
    except msgspec.DecodeError:
        return None
    if not isinstance(data, dict):
        return None
    fields: dict[str, Any] = {}
    for key in ("name", "cat"):
        if key in data and data[key] is not None:
            fields[key] = str(data[key])
    for key in _INT_FIELDS:
        number = _number(data.get(key))
        if number is not None:
            fields[key] = int(number)
    ph = _phase(data.get("ph", COMPLETE))
    fields["ph"] = ph if ph is not None else 0
    args = data.get("args")
    if isinstance(args, dict):
        fields["args"] = _normalize_args(args)
    try:
        return msgspec.convert(fields, event_type, strict=False)
    except msgspec.ValidationError:
        return None


def _normalize_args(args: dict[str, Any]) -> dict[str, Any]:
    kept: dict[str, Any] = {key: args[key] for key in ("hhash", "fhash", "name", "value", "hostname")
                            if key in args}
    for key in _INT_ARGS:
        number = _number(args.get(key))
        if number is not None:
            kept[key] = int(number)
    size = _number(args.get("image_size"))
    if size is not None:
        kept["image_size"] = float(size)
    return kept
