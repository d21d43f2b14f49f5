"""A pickle machine that builds only plain data, and no more of it than a budget allows (the
data.pkl of a PyTorch checkpoint: see pth_pickle.py for what it may name).

`pickle.Unpickler` with a strict `find_class` runs no code, but it builds whatever the opcodes ask
for: a small deflated data.pkl of EMPTY_SET opcodes builds gigabytes of sets, dict keys that share
one hash (multiples of 2**61 - 1) take quadratic time, BUILD sets any attribute of what it gets
(an OrderedDict's .get, say). Here a pickle is read in two passes over `pickletools.genops`:

- `_scan` checks every opcode before anything is built: no opcode torch.save does not write
  (old-style instances, extension codes, out-of-band buffers, text persistent ids, Python 2
  strings), memo entries numbered in order, no int of more than 2048 bits, at most `Budget.ops`
  opcodes, and `Budget.memory` bytes for the arguments it keeps and the objects of fixed size they
  push (empty containers, strings, numbers, memo entries);
- `_Machine` then runs them with the stack, marks and memo of pickle, and charges the rest of that
  budget for what only running tells (each container built from a MARK, a container again as it
  grows, what a call returns) as soon as it is built: the first excess stops it. A container grows
  only by the opcode of its kind (APPENDS a list, SETITEMS a dict, ADDITEMS a set); dicts and sets
  are keyed by strings and by ints below 2**61 - 1 only, which have distinct hashes (strings'
  are randomised), each key checked before the first is inserted. Names (GLOBAL, STACK_GLOBAL),
  persistent ids, what may be called (REDUCE) and BUILD are the caller's `names` to allow.
"""
import array
import collections
import pickletools
import sys
from typing import Any, Callable, Container, Iterable, Iterator, NoReturn, Protocol, Sequence, TypeVar, Union, cast

from .errors import one_line, short

# torch.save never writes these: old-style instances, extension registries, out-of-band buffers, text
# persistent ids and Python 2 strings. (It writes NEWOBJ for a class, such as a pickled nn.Module,
# which the machine has no method for: the class's GLOBAL before it is refused by name first.)
_REFUSED_OPCODES = {"INST", "OBJ", "EXT1", "EXT2", "EXT4", "NEXT_BUFFER", "READONLY_BUFFER", "PERSID", "STRING",
                    "BINSTRING", "SHORT_BINSTRING"}
_KEY_INTS = sys.hash_info.modulus  # ints below it hash to themselves: no two share a hash
_MAX_INT_BITS = 2048               # torch writes ints of at most 64 bits (sizes, counts, num_batches_tracked)
_MEMO_ENTRY = 64                   # bytes a memo entry takes (dict slot, int key)


class Bad(Exception):
    """A defect of the pickle, or more than its budget to build; pth.py names the file."""


class Names(Protocol):
    """What a pickle may name, call and build (pth_pickle's `_Names`, a class of static methods):
    `find_class(module, name)` what GLOBAL pushes, `callables` the ids of what REDUCE may call,
    `persistent_load(pid)` what BINPERSID pushes, `set_state(inst, state)` BUILD. Each raises to refuse."""

    @property
    def callables(self) -> Container[int]: ...

    def find_class(self, module: str, name: str) -> Any: ...

    def persistent_load(self, pid: Any) -> Any: ...

    def set_state(self, inst: Any, state: Any) -> None: ...


def a(noun: str) -> str:
    """`noun` with its indefinite article."""
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def check_keys(keys: Iterable[Any], what: str) -> None:
    """Bad, before any is inserted, for a key that could share its hash with others: only strings
    (randomised hashes) and ints below 2**61 - 1 (their own hashes) key a state dict's containers."""
    for key in keys:
        if not (type(key) is str or (type(key) in (int, bool) and -_KEY_INTS < key < _KEY_INTS)):
            raise Bad(f"its data.pkl uses {short(key)} as {what}; a state dict's pickle keys its dicts and "
                      f"sets by strings and small ints only")


class Budget:
    """What a data.pkl may build: `memory` bytes of objects and `ops` opcodes; `needs` names what
    they are sized for, in the refusal ("a state dict of 3 storages")."""

    def __init__(self, memory: int, ops: int, needs: str) -> None:
        self.memory, self.ops, self.needs = memory, ops, needs


def unpickle(data: bytes, budget: Budget, names: Names) -> Any:
    """The object the pickle `data` holds, built within `budget` from what `names` allows; Bad (a
    defect, or too much to build), what `names` raises (a refusal), or an exception of a call."""
    program, left = _scan(data, budget)
    return _Machine(budget, left, names).run(program)


# what the objects of fixed size an opcode pushes take, charged by _scan
_FIXED = {"EMPTY_LIST": sys.getsizeof([]), "EMPTY_DICT": sys.getsizeof({}), "EMPTY_SET": sys.getsizeof(set()),
          "TUPLE1": sys.getsizeof((0,)), "TUPLE2": sys.getsizeof((0, 0)), "TUPLE3": sys.getsizeof((0, 0, 0)),
          "MARK": 8, "PUT": _MEMO_ENTRY, "BINPUT": _MEMO_ENTRY, "LONG_BINPUT": _MEMO_ENTRY, "MEMOIZE": _MEMO_ENTRY}
_PER_OP = 32  # an opcode kept for the machine (handler, argument and position: 3 slots) and its stack slot
_REFUSE, _PUT = 1, 2  # what _scan checks of an opcode
# an opcode's method of _Machine: None, or (the pickle's object,) for STOP
_Handler = Callable[["_Machine", Any], Union[tuple[Any], None]]
# the scanned opcodes: their handlers, arguments and positions in data.pkl
_Program = tuple[list[_Handler], list[Any], Sequence[int]]


def _scan(data: bytes, budget: Budget) -> tuple[_Program, int]:
    """The opcodes of `data` as lists of handlers (_Machine's), arguments and positions, checked
    before anything is built: no refused opcode, memo entries numbered in order, no int over
    _MAX_INT_BITS, and at most `budget.ops` opcodes whose arguments and fixed-size objects fit
    `budget.memory`; also the bytes of that budget left for what the machine builds."""
    handlers: list[_Handler] = []
    args: list[Any] = []
    positions = array.array("q")
    add_handler, add_arg, add_position = handlers.append, args.append, positions.append
    left, limit, table, getsizeof = budget.memory, budget.ops, _OPCODES, sys.getsizeof
    try:
        # arguments of any kind; a position for every opcode of bytes (None is for a stream without tell)
        opcodes = cast("Iterator[tuple[pickletools.OpcodeInfo, Any, int]]", pickletools.genops(data))
        for count, (op, arg, pos) in enumerate(opcodes):
            if count >= limit:
                raise Bad(f"its data.pkl has more than {limit} opcodes, more than {budget.needs} needs")
            handler, cost, check = table[op]
            if check == _REFUSE:
                raise Bad(f"its data.pkl uses the pickle opcode {op.name}, which torch.save does not write")
            if check == _PUT and arg > count:  # the memo would grow to the index
                raise Bad(f"its data.pkl stores memo entry {arg} after {count} opcodes; a pickler numbers them "
                          f"in order")
            if arg is not None:
                if type(arg) is int and arg.bit_length() > _MAX_INT_BITS:
                    raise Bad(f"its data.pkl holds an int of {arg.bit_length()} bits; a state dict's have at "
                              f"most 64")
                cost += getsizeof(arg)
            left -= cost
            if left < 0:
                raise _too_much(budget, pos)
            add_handler(handler)
            add_arg(arg)
            add_position(pos)
    except Bad:
        raise
    except Exception as exc:  # noqa: BLE001 -- any defect of the bytes, described in one line
        raise Bad(f"its data.pkl is not a valid pickle ({one_line(exc)})") from None
    return (handlers, args, positions), left


def _too_much(budget: Budget, pos: int) -> Bad:
    return Bad(f"its data.pkl builds more than {budget.memory} bytes of objects (by byte {pos}), more than "
               f"{budget.needs} needs")


_C = TypeVar("_C")  # a container the pickle grows
_D = TypeVar("_D", bound=dict[Any, Any])


class _Machine:
    """Runs a scanned program: the stack, the marks and the memo of pickle, with the containers,
    calls and BUILDs that a state dict's pickle makes; charges what _scan could not know. Each
    opcode is the method op_ and its name, which returns None, or (the result,) for STOP."""

    def __init__(self, budget: Budget, left: int, names: Names) -> None:
        self.budget, self.left, self.names = budget, left, names
        self.stack: list[Any] = []
        self.marks: list[int] = []  # the stack's length at each MARK
        self.memo: dict[int, Any] = {}
        self.positions: Sequence[int] = ()
        self.step = 0

    @property
    def pos(self) -> int:
        """The byte of data.pkl where the opcode being run starts."""
        return self.positions[self.step]

    def run(self, program: _Program) -> Any:
        handlers, args, self.positions = program
        for self.step, handler in enumerate(handlers):
            done = handler(self, args[self.step])
            if done is not None:
                return done[0]
        raise Bad("its data.pkl is not a valid pickle (no STOP opcode)")  # genops refuses it first

    # -- accounting and the stack

    def _charge(self, nbytes: int) -> None:
        self.left -= nbytes
        if self.left < 0:
            raise _too_much(self.budget, self.pos)

    def _new(self, obj: Any) -> None:
        """Push an object built here, charged at its size."""
        self.left -= sys.getsizeof(obj)
        if self.left < 0:
            raise _too_much(self.budget, self.pos)
        self.stack.append(obj)

    def _pop(self) -> Any:
        if not self.stack:
            raise Bad(f"its data.pkl pops more than it pushed (at byte {self.pos})")
        return self.stack.pop()

    def _top(self, kinds: tuple[type, ...], what: str) -> Any:
        if not self.stack:
            raise Bad(f"its data.pkl {what} with nothing on the stack (at byte {self.pos})")
        top = self.stack[-1]
        if type(top) not in kinds:
            raise Bad(f"its data.pkl {what} on {a(type(top).__name__)} (at byte {self.pos}); a state dict's "
                      f"pickle does so only on {a(kinds[0].__name__)}")
        return top

    def _pop_mark(self) -> list[Any]:
        if not self.marks:
            raise Bad(f"its data.pkl closes a MARK it never set (at byte {self.pos})")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _grow(self, container: _C, add: Callable[[_C, list[Any]], object], items: list[Any]) -> None:
        before = sys.getsizeof(container)
        add(container, items)
        self._charge(sys.getsizeof(container) - before)

    # -- protocol, stack and memo (each opcode method is op_ and the opcode's name)

    def op_proto(self, arg: int) -> None:
        if not 0 <= arg <= 5:
            raise Bad(f"its data.pkl has pickle protocol {arg}; protocols 0 to 5 exist")

    def op_frame(self, arg: int) -> None:
        pass

    def op_stop(self, arg: None) -> tuple[Any]:
        return (self._pop(),)

    def op_mark(self, arg: None) -> None:
        self.marks.append(len(self.stack))

    def op_pop_mark(self, arg: None) -> None:
        self._pop_mark()

    def op_pop(self, arg: None) -> None:
        if self.stack:
            self.stack.pop()
        else:
            self._pop_mark()

    def op_dup(self, arg: None) -> None:
        if not self.stack:
            raise Bad(f"its data.pkl duplicates nothing (at byte {self.pos})")
        self.stack.append(self.stack[-1])

    def op_get(self, index: int) -> None:
        if index not in self.memo:
            raise Bad(f"its data.pkl reads memo entry {index}, which it never stored")
        self.stack.append(self.memo[index])

    op_binget = op_long_binget = op_get

    def op_put(self, index: int) -> None:
        if not self.stack:
            raise Bad(f"its data.pkl memoizes nothing (at byte {self.pos})")
        self.memo[index] = self.stack[-1]

    op_binput = op_long_binput = op_put

    def op_memoize(self, arg: None) -> None:
        self.op_put(len(self.memo))

    # -- scalars, charged by _scan

    def op_none(self, arg: None) -> None:
        self.stack.append(None)

    def op_newtrue(self, arg: None) -> None:
        self.stack.append(True)

    def op_newfalse(self, arg: None) -> None:
        self.stack.append(False)

    def op_int(self, value: int | float | str | bytes) -> None:
        self.stack.append(value)

    op_binint = op_binint1 = op_binint2 = op_long = op_long1 = op_long4 = op_float = op_binfloat = op_int
    op_unicode = op_short_binunicode = op_binunicode = op_binunicode8 = op_int
    op_binbytes = op_short_binbytes = op_binbytes8 = op_int

    def op_bytearray8(self, data: bytes) -> None:
        self._new(bytearray(data))

    # -- containers

    def op_empty_list(self, arg: None) -> None:
        self.stack.append([])

    def op_empty_dict(self, arg: None) -> None:
        self.stack.append({})

    def op_empty_set(self, arg: None) -> None:
        self.stack.append(set())

    def op_empty_tuple(self, arg: None) -> None:
        self.stack.append(())

    def op_tuple(self, arg: None) -> None:
        self._new(tuple(self._pop_mark()))

    def op_tuple1(self, arg: None) -> None:
        self.stack.append((self._pop(),))

    def op_tuple2(self, arg: None) -> None:
        second, first = self._pop(), self._pop()
        self.stack.append((first, second))

    def op_tuple3(self, arg: None) -> None:
        third, second, first = self._pop(), self._pop(), self._pop()
        self.stack.append((first, second, third))

    def op_list(self, arg: None) -> None:
        self._new(self._pop_mark())

    def op_frozenset(self, arg: None) -> None:
        items = self._pop_mark()
        check_keys(items, "an item of a frozenset")
        self._new(frozenset(items))

    def op_dict(self, arg: None) -> None:
        self._new(self._pairs_into({}, self._pop_mark()))

    def op_append(self, arg: None) -> None:
        value = self._pop()
        self._grow(self._top((list,), "appends"), list.extend, [value])

    def op_appends(self, arg: None) -> None:
        items = self._pop_mark()
        self._grow(self._top((list,), "appends"), list.extend, items)

    def op_setitem(self, arg: None) -> None:
        value, key = self._pop(), self._pop()
        self._setitems([key, value])

    def op_setitems(self, arg: None) -> None:
        self._setitems(self._pop_mark())

    def _setitems(self, items: list[Any]) -> None:
        self._grow(self._top((dict, collections.OrderedDict), "sets items"), self._pairs_into, items)

    @staticmethod
    def _pairs_into(target: _D, items: list[Any]) -> _D:
        if len(items) % 2:
            raise Bad(f"its data.pkl sets the items of a dict from {len(items)} keys and values, an odd number")
        keys = items[::2]
        check_keys(keys, "a dict key")
        target.update(zip(keys, items[1::2]))
        return target

    def op_additems(self, arg: None) -> None:
        items = self._pop_mark()
        target = self._top((set,), "adds items")
        check_keys(items, "an item of a set")
        self._grow(target, set.update, items)

    # -- names, calls, storages, BUILD

    def op_global(self, arg: str) -> None:
        module, _, name = arg.partition(" ")
        self.stack.append(self.names.find_class(module, name))

    def op_stack_global(self, arg: None) -> None:
        name, module = self._pop(), self._pop()
        if type(module) is not str or type(name) is not str:
            raise Bad(f"its data.pkl names a global by {short(module)} and {short(name)}, not two strings")
        self.stack.append(self.names.find_class(module, name))

    def op_reduce(self, arg: None) -> None:
        args, func = self._pop(), self._pop()
        if id(func) not in self.names.callables:
            raise Bad(f"its data.pkl calls {short(func)}, which is not a constructor of a state dict's contents")
        if type(args) is not tuple:
            raise Bad(f"its data.pkl calls {func.__name__.lstrip('_')} with {short(args)}, not a tuple")
        self._new(func(*args))

    def op_binpersid(self, arg: None) -> None:
        self._new(self.names.persistent_load(self._pop()))

    def op_build(self, arg: None) -> None:
        state = self._pop()
        if not self.stack:
            raise Bad(f"its data.pkl builds nothing (at byte {self.pos})")
        self.names.set_state(self.stack[-1], state)


def _refusal(name: str) -> _Handler:
    def refuse(machine: _Machine, arg: Any) -> NoReturn:
        raise Bad(f"its data.pkl uses the pickle opcode {name}, which torch.save does not write")
    return refuse


# opcode -> (the machine's method, or a refusal; the bytes of fixed-size objects it pushes, and an
# opcode's own; what _scan checks)
_OPCODES: dict[pickletools.OpcodeInfo, tuple[_Handler, int, int]]
_OPCODES = {op: (getattr(_Machine, "op_" + op.name.lower(), None) or _refusal(op.name),
                 _PER_OP + _FIXED.get(op.name, 0),
                 _REFUSE if op.name in _REFUSED_OPCODES else _PUT if op.name in ("PUT", "BINPUT", "LONG_BINPUT") else 0)
            for op in pickletools.opcodes}
