"""Guarded calls: Redis commands that run only while a hold is on the server.

The check of the hold and the commands are one server-side function call on the node of
the lock's slot, so a hold that is gone (its lease ran out by the server's clock, it was
broken, a failover lost it) writes nothing and the call raises :class:`LockLost`. Writes
need a write hold; reads run under any. Every key must be in the lock's slot (give it
the lock's ``{hashtag}``).

Conditions, as etcd's ``Txn().If().Then().Else()``: every condition is read before any
command runs, in the same call; if one fails, the commands after :meth:`Guarded.otherwise`
run instead (or none). Each command is checked before anything runs (arguments, the
types of its keys, the values it adds to): a command that would fail fails the call
with nothing written.

    with lock.write(timeout=5) as w:
        outcome = (w.guarded()
                   .when(Condition.field("stock:{42}", "n").gt(0))
                   .hincr_by("stock:{42}", "n", -1)
                   .rpush("orders:{42}", "order-7")
                   .otherwise()
                   .set("orders:{42}:sold-out", "1")
                   .commit())
"""

from dataclasses import dataclass
from typing import Any, Callable, Generic, List, Optional, Tuple, TypeVar, Union

__all__ = ["Condition", "Compare", "Guarded", "Outcome", "Word"]

#: What a command takes as an argument: bytes, a str (UTF-8) or an int.
Word = Union[bytes, str, int]


def _word(value: Word) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode("ascii")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"a command's argument is bytes, str or int; got {type(value).__name__}")


class Condition:
    """A condition of a guarded call; build one with the class methods."""

    __slots__ = ("_step",)

    def __init__(self, key: Word, field: Optional[Word], op: str, operand: Union[None, bytes, int]) -> None:
        self._step = (_word(key), None if field is None else _word(field), op, operand)

    @staticmethod
    def exists(key: Word) -> "Condition":
        """The key exists (of any type)."""
        return Condition(key, None, "key_exists", None)

    @staticmethod
    def missing(key: Word) -> "Condition":
        """The key does not exist."""
        return Condition(key, None, "key_missing", None)

    @staticmethod
    def value(key: Word) -> "Compare":
        """A comparison of the string value of ``key``."""
        return Compare(key, None)

    @staticmethod
    def field(key: Word, field: Word) -> "Compare":
        """A comparison of the field ``field`` of the hash ``key``."""
        return Compare(key, field)

    def __repr__(self) -> str:
        key, field, op, operand = self._step
        where = key if field is None else (key, field)
        return f"Condition({where!r} {op} {operand!r})"


class Compare:
    """A value to compare (see :meth:`Condition.value`, :meth:`Condition.field`).

    Integers are compared exactly (as text, beyond 2**53); a missing or non-integer value
    fails ``lt``/``le``/``gt``/``ge``."""

    __slots__ = ("_key", "_field")

    def __init__(self, key: Word, field: Optional[Word]) -> None:
        self._key, self._field = key, field

    def _make(self, op: str, operand: Union[None, bytes, int]) -> Condition:
        return Condition(self._key, self._field, op, operand)

    def exists(self) -> Condition:
        """The value is there."""
        return self._make("exists", None)

    def missing(self) -> Condition:
        """The value is not there."""
        return self._make("missing", None)

    def eq(self, value: Word) -> Condition:
        """The value equals ``value`` (as bytes)."""
        return self._make("eq", _word(value))

    def ne(self, value: Word) -> Condition:
        """The value is missing or differs from ``value``."""
        return self._make("ne", _word(value))

    def lt(self, n: int) -> Condition:
        """The value is an integer below ``n``."""
        return self._make("lt", _int(n))

    def le(self, n: int) -> Condition:
        """The value is an integer at most ``n``."""
        return self._make("le", _int(n))

    def gt(self, n: int) -> Condition:
        """The value is an integer above ``n``."""
        return self._make("gt", _int(n))

    def ge(self, n: int) -> Condition:
        """The value is an integer at least ``n``."""
        return self._make("ge", _int(n))


def _int(n: int) -> int:
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"an integer comparison takes an int; got {type(n).__name__}")
    if not -(2**63) <= n < 2**63:
        raise ValueError(f"{n} is out of the 64-bit range")
    return n


@dataclass(frozen=True)
class Outcome:
    """What :meth:`Guarded.commit` returns."""

    #: Every condition held: the commands before ``otherwise()`` ran; else those after it.
    succeeded: bool
    #: The first condition that did not hold, by its place (from 0).
    failed_condition: Optional[int]
    #: The replies of the commands that ran, in order (a command that failed raises
    #: :class:`CommandFailed` instead: all or nothing).
    replies: List[Any]


R = TypeVar("R")


class Guarded(Generic[R]):
    """Conditions and commands for one guarded call, built with chained calls, sent by
    :meth:`run` or :meth:`commit`. Made by a guard's ``guarded()``; with an
    :class:`AsyncGuard`, ``run()`` and ``commit()`` are awaitables."""

    def __init__(self, runner: Callable[[List[Any], Optional[List[Any]], bool], R]) -> None:
        self._runner = runner
        self._then: List[Tuple[Any, ...]] = []
        self._otherwise: Optional[List[Tuple[Any, ...]]] = None

    def _add(self, step: Tuple[Any, ...]) -> "Guarded[R]":
        (self._then if self._otherwise is None else self._otherwise).append(step)
        return self

    def when(self, condition: Condition) -> "Guarded[R]":
        """Adds a condition (before ``otherwise()``)."""
        if self._otherwise is not None:
            raise ValueError("conditions come before otherwise()")
        if not isinstance(condition, Condition):
            raise TypeError("when() takes a Condition")
        return self._add(condition._step)

    def otherwise(self) -> "Guarded[R]":
        """The commands after this run when a condition did not hold."""
        if self._otherwise is not None:
            raise ValueError("otherwise() comes once")
        self._otherwise = []
        return self

    def command(self, name: str, *args: Word) -> "Guarded[R]":
        """Any allowed command (``GET``, ``SET``, ``HINCRBY``, ``RPUSH``, ...) with its
        arguments, checked before sending."""
        return self._add((str(name), [_word(a) for a in args]))

    def get(self, key: Word) -> "Guarded[R]":
        """``GET key``."""
        return self.command("GET", key)

    def set(self, key: Word, value: Word) -> "Guarded[R]":
        """``SET key value``."""
        return self.command("SET", key, value)

    def delete(self, *keys: Word) -> "Guarded[R]":
        """``DEL key...``."""
        return self.command("DEL", *keys)

    def incr_by(self, key: Word, n: int) -> "Guarded[R]":
        """``INCRBY key n``."""
        return self.command("INCRBY", key, n)

    def hget(self, key: Word, field: Word) -> "Guarded[R]":
        """``HGET key field``."""
        return self.command("HGET", key, field)

    def hset(self, key: Word, field: Word, value: Word) -> "Guarded[R]":
        """``HSET key field value``."""
        return self.command("HSET", key, field, value)

    def hincr_by(self, key: Word, field: Word, n: int) -> "Guarded[R]":
        """``HINCRBY key field n``."""
        return self.command("HINCRBY", key, field, n)

    def rpush(self, key: Word, *values: Word) -> "Guarded[R]":
        """``RPUSH key value...``."""
        return self.command("RPUSH", key, *values)

    def run(self) -> R:
        """Runs the call: the replies of the commands, in order. All or nothing: raises
        :class:`CommandFailed` when a command failed (or would have), and then no key the
        call names changed (``nothing_ran``; ``undone`` when the commands before it ran
        and were put back). Raises :class:`ConditionFailed` when a condition did not
        hold (the ``otherwise()`` branch, if any, ran: :meth:`commit` returns its
        replies), :class:`LockLost` when the hold is gone (nothing written)."""
        return self._runner(self._then, self._otherwise, False)

    def commit(self) -> R:
        """Runs the call and returns its :class:`Outcome` (a failed condition is an
        outcome, not an exception; a failed command raises :class:`CommandFailed`, as in
        :meth:`run`)."""
        return self._runner(self._then, self._otherwise, True)
