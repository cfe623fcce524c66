"""Typed configuration: dataclass defaults <- YAML/JSON file <- `key=value` overrides.

Every setting is declared once, as a field of a dataclass. A run's settings are
built in three layers, each overriding the one before:

1. the dataclass defaults;
2. a YAML (or JSON) file, whose nesting mirrors nested dataclasses;
3. command-line style overrides `key=value`, with dotted keys for nested
   sections (`memory.window=1024`). Values are read as YAML, so
   `ratios=[2,4,8]`, `lr=5e-5`, `flag=true` and `name=null` all work.

Values are checked and coerced against the field annotations (int, float, str,
bool, Path, Enum, Literal, Optional/unions, list/tuple/dict, nested dataclasses).
Unknown keys are errors that name the key, its section, the valid keys and the
closest match. The dataclass is always built by calling the class, so its
`__post_init__` validation runs.

A field may also accept the name of an entry declared once elsewhere: its metadata
`{NAMED_ENTRIES: mapping}` makes a string value stand for `mapping[value]` (a copy),
e.g. `model.architecture: qwen2-7b-instruct` (`memorag.runtime.architectures`). An unknown
name is an error listing the known ones; the built config holds the entry itself.

    cfg = load_config(TrainConfig, "configs/debug.yaml", ["memory.window=1024"])
    save_config(cfg, out_dir / "config.yaml")
    same = load_config(TrainConfig, out_dir / "config.yaml")
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import enum
import functools
import inspect
import json
import os
import sys
import textwrap
import types
import typing
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from memorag.storage.io import atomic_write_text

T = TypeVar("T")

_NONE_TYPE = type(None)
_TEXT_TYPES = (str, Path)
_LIST_ORIGINS = (list, tuple, set, frozenset, Sequence, typing.Sequence)
_DICT_ORIGINS = (dict, Mapping, typing.Mapping)


NAMED_ENTRIES = "memorag.config.named_entries"
"""Field metadata key: a mapping of names a string value may stand for (see the module docstring)."""


class ConfigError(ValueError):
    """A configuration that cannot be built: unknown key, wrong type, bad file or bad value."""


@dataclasses.dataclass(frozen=True)
class _OverrideValue:
    """A `key=value` override: its YAML reading, and the raw text for string fields."""

    raw: str
    parsed: Any


def _unwrap(value: Any) -> Any:
    return value.parsed if isinstance(value, _OverrideValue) else value


# ---------------------------------------------------------------------------
# public API


def load_config(
    cls: type[T],
    path: str | os.PathLike[str] | None = None,
    overrides: Sequence[str] = (),
) -> T:
    """Build `cls` from its defaults, then the file at `path` (if any), then `overrides`."""
    _require_dataclass_type(cls)
    data = apply_overrides(read_config_file(path) if path is not None else {}, overrides)
    return _build(cls, data, where="", base=None)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """`data` (a nested mapping of typed values) with `key=value` overrides set into it, in order;
    `config_from_dict` then checks and builds the whole."""
    for item in overrides:
        key, value = parse_override(item)
        _set_dotted(data, key, value)
    return data


def config_from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Build `cls` from a (nested) mapping; missing keys take the defaults, unknown keys are errors."""
    _require_dataclass_type(cls)
    return _build(cls, data, where="", base=None)


def config_to_dict(cfg: Any) -> dict[str, Any]:
    """A dataclass config as plain, YAML/JSON-safe dicts, lists and scalars."""
    if not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        raise TypeError(f"config_to_dict expects a dataclass instance, got {type(cfg).__name__}")
    return _to_plain(cfg)


def config_view(cls: type[T], source: Any) -> T:
    """The dataclass `cls` with each field read from `source`'s attribute of the same name (a
    narrow, read-only view of a larger config, e.g. the settings a mode reads of the pipeline's);
    lists become tuples, so a frozen view shares nothing mutable with its source."""
    _require_dataclass_type(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if not hasattr(source, f.name):
            raise ConfigError(f"{cls.__name__}.{f.name} has no field of the same name in {type(source).__name__}")
        value = getattr(source, f.name)
        values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)


def save_config(cfg: Any, path: str | os.PathLike[str]) -> Path:
    """Write a config (dataclass or mapping) as YAML (.yaml/.yml) or JSON (.json), atomically."""
    target = Path(path)
    data = _to_plain(cfg) if dataclasses.is_dataclass(cfg) else _to_plain(dict(cfg))
    suffix = target.suffix.lower()
    if suffix in (".yaml", ".yml"):
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    elif suffix == ".json":
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        raise ConfigError(f"cannot save config to {target}: use a .yaml, .yml or .json file name")
    return atomic_write_text(target, text)


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The top-level mapping of a YAML or JSON config file (an empty file gives {})."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"config file not found: {file}")
    text = file.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot parse config file {file}: {err}") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {file} must hold a mapping at the top, not {type(data).__name__}")
    return data


def parse_override(item: str) -> tuple[str, Any]:
    """Split `key=value`; the value is read as YAML (the raw text is kept for string fields)."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} must look like key=value (dotted keys for sections)")
    if raw.strip() == "":
        return key, _OverrideValue(raw, "")
    try:
        parsed = yaml.safe_load(raw)
    except yaml.YAMLError as err:
        raise ConfigError(f"override {item!r}: cannot read the value as YAML: {err}") from err
    return key, _OverrideValue(raw, parsed)


def config_from_argv(cls: type[T], argv: Sequence[str] | None = None) -> T:
    """Build `cls` from `[--config FILE] [key=value ...]` (default: sys.argv[1:]).

    `--help` prints every settable key with its type and default, then exits.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    path: str | None = None
    overrides: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-h", "--help"):
            print(format_config_help(cls))
            raise SystemExit(0)
        if arg == "--config":
            if i + 1 >= len(args):
                raise ConfigError("--config needs a file path")
            path, i = args[i + 1], i + 2
            continue
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            raise ConfigError(f"unknown option {arg!r}: use --config FILE and key=value overrides")
        else:
            overrides.append(arg)
        i += 1
    return load_config(cls, path, overrides)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One settable key of a config dataclass, as `--help` and the documentation list it."""

    key: str
    type_name: str
    default: str
    description: str


def config_settings(cls: type) -> list[Setting]:
    """Every settable key of `cls` (nested sections dotted), with its type, default and description (the
    string under the field in its class: an attribute docstring)."""
    _require_dataclass_type(cls)
    settings: list[Setting] = []

    def walk(section: type, prefix: str, defaults: Any) -> None:
        hints, described = _type_hints(section), attribute_docstrings(section)
        for f in dataclasses.fields(section):
            if not f.init:
                continue
            default = getattr(defaults, f.name) if defaults is not None else _field_default(f)
            if dataclasses.is_dataclass(default) and not isinstance(default, type):
                walk(type(default), f"{prefix}{f.name}.", default)
                continue
            shown = "(required)" if default is dataclasses.MISSING else repr(_to_plain(default))
            named = f.metadata.get(NAMED_ENTRIES)
            if named:
                shown += f" (or a name: {', '.join(sorted(named))})"
            settings.append(Setting(f"{prefix}{f.name}", _type_name(hints[f.name]), shown,
                                    described.get(f.name, "")))

    walk(cls, "", None)
    return settings


@functools.cache
def attribute_docstrings(cls: type) -> dict[str, str]:
    """The string literal written under each field of dataclass `cls`, whitespace collapsed to one line.

    Read from the class's source; a class whose source cannot be read (an install without .py files)
    has none, and its settings are listed without descriptions.
    """
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0].body  # type: ignore[attr-defined]
    found = {}
    for node, following in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            found[node.target.id] = " ".join(following.value.value.split())
    return found


def format_config_help(cls: type) -> str:
    """One line per settable key, `dotted.key: type = default`, and its description wrapped under it."""
    lines = [f"{cls.__name__} settings (override with key=value):"]
    for setting in config_settings(cls):
        lines += textwrap.wrap(f"{setting.key}: {setting.type_name} = {setting.default}", 80, initial_indent="  ",
                               subsequent_indent=" " * 8, break_long_words=False, break_on_hyphens=False)
        lines += textwrap.wrap(setting.description, 78, initial_indent=" " * 6, subsequent_indent=" " * 6)
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# building


def _require_dataclass_type(cls: Any) -> None:
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"expected a dataclass type, got {cls!r}")


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as err:
        raise ConfigError(
            f"cannot resolve the annotations of {cls.__name__}: {err} "
            "(config dataclasses must be defined at module level)"
        ) from err


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _section_name(where: str, cls: type) -> str:
    return f"section '{where}' ({cls.__name__})" if where else f"the top level ({cls.__name__})"


def _unknown_key_error(key: Any, cls: type, where: str, valid: Sequence[str]) -> ConfigError:
    dotted = f"{where}.{key}" if where else str(key)
    message = f"unknown key '{dotted}' in {_section_name(where, cls)}"
    close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
    if close:
        message += f"; did you mean '{close[0]}'?"
    return ConfigError(f"{message} Valid keys: {', '.join(valid)}")


def _build(cls: type[T], data: Any, where: str, base: Any) -> T:
    data = _unwrap(data)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"{_section_name(where, cls)} must be a mapping of keys to values, got {type(data).__name__} {data!r}"
        )
    data = _rename_keys(cls, data, where)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    settable = [name for name, f in fields.items() if f.init]
    for key in data:
        if key not in settable:
            raise _unknown_key_error(key, cls, where, settable)
    hints = _type_hints(cls)
    kwargs: dict[str, Any] = {}
    missing: list[str] = []
    for name in settable:
        key_where = f"{where}.{name}" if where else name
        if name in data:
            value = _resolve_name(data[name], fields[name], key_where)
            nested_base = None
            if isinstance(_unwrap(value), Mapping):
                nested_base = getattr(base, name) if base is not None else _field_default(fields[name])
            kwargs[name] = _coerce(value, hints[name], key_where, nested_base)
        elif base is not None:
            kwargs[name] = getattr(base, name)
        elif _field_default(fields[name]) is dataclasses.MISSING:
            missing.append(name)
    if missing:
        raise ConfigError(f"{_section_name(where, cls)} is missing required key(s): {', '.join(missing)}")
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as err:
        raise ConfigError(f"invalid {_section_name(where, cls)}: {err}") from err


def _resolve_name(value: Any, f: dataclasses.Field, where: str) -> Any:
    """A string value of a field with `NAMED_ENTRIES` metadata: the named entry (a copy)."""
    entries = f.metadata.get(NAMED_ENTRIES)
    name = _unwrap(value)
    if entries is None or not isinstance(name, str):
        return value
    if name not in entries:
        message = f"{where}: unknown name {name!r}; known names: {', '.join(sorted(entries))}"
        close = difflib.get_close_matches(name, list(entries), n=1, cutoff=0.6)
        if close:
            message += f"; did you mean {close[0]!r}?"
        raise ConfigError(message + " (or give the fields themselves as a mapping)")
    return copy.deepcopy(entries[name])


def _rename_keys(cls: type, data: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """Old keys a dataclass still reads under their new names (its `renamed_keys` class attribute:
    old key -> new dotted key), each with a `FutureWarning` naming the new key."""
    renamed: Mapping[str, str] = getattr(cls, "renamed_keys", None) or {}
    if not any(key in renamed for key in data):
        return data
    data = dict(data)
    for old in [key for key in data if key in renamed]:
        new = renamed[old]
        prefix = f"{where}." if where else ""
        warnings.warn(f"setting '{prefix}{old}' is deprecated: it is '{prefix}{new}' now; write that instead "
                      f"(in YAML, '{new.split('.')[-1]}' under a '{new.split('.')[0]}:' section)",
                      FutureWarning, stacklevel=4)
        value = data.pop(old)
        node: dict[str, Any] = data
        parts = new.split(".")
        for part in parts[:-1]:
            child = _unwrap(node.get(part))
            if dataclasses.is_dataclass(child) and not isinstance(child, type):
                child = _to_plain(child)
            node[part] = dict(child) if isinstance(child, Mapping) else {}
            node = node[part]
        node[parts[-1]] = value
    return data


def _set_dotted(data: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    node = data
    for depth, part in enumerate(parts[:-1]):
        child = _unwrap(node.get(part))
        if child is None:
            child = {}
        elif isinstance(child, Mapping):
            child = dict(child)
        else:
            prefix = ".".join(parts[: depth + 1])
            raise ConfigError(f"override '{key}': '{prefix}' is {child!r}, not a section with keys")
        node[part] = child
        node = child
    node[parts[-1]] = value


# ---------------------------------------------------------------------------
# coercion


def _type_name(tp: Any) -> str:
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def _fail(where: str, tp: Any, value: Any) -> ConfigError:
    return ConfigError(f"{where}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _is_exact(value: Any, tp: Any) -> bool:
    if tp is _NONE_TYPE:
        return value is None
    if isinstance(tp, type) and not get_args(tp) and get_origin(tp) is None:
        return type(value) is tp or (dataclasses.is_dataclass(tp) and isinstance(value, tp))
    return False


def _coerce(value: Any, tp: Any, where: str, base: Any = None) -> Any:
    if tp is Any or tp is object:
        return _unwrap(value)
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return _coerce_union(value, get_args(tp), where, base)
    if origin is Literal:
        return _coerce_literal(value, get_args(tp), where)
    if isinstance(value, _OverrideValue):
        if tp in _TEXT_TYPES:
            # `name=007` or `tag=on` mean the text as typed, not YAML's int or bool.
            return tp(value.parsed if isinstance(value.parsed, str) else value.raw.strip())
        value = value.parsed

    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        return _build(tp, value, where, base if isinstance(base, tp) else None)
    if origin in _LIST_ORIGINS or tp in (list, tuple, set, frozenset):
        return _coerce_collection(value, tp, origin or tp, where)
    if origin in _DICT_ORIGINS or tp is dict:
        if not isinstance(value, Mapping):
            raise _fail(where, tp, value)
        key_tp, value_tp = get_args(tp) or (Any, Any)
        return {
            _coerce(k, key_tp, f"{where}[{k!r}]"): _coerce(v, value_tp, f"{where}.{k}")
            for k, v in value.items()
        }
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _fail(where, tp, value)
    if tp is int:
        return _coerce_int(value, where)
    if tp is float:
        return _coerce_float(value, where)
    if tp is str:
        if isinstance(value, str):
            return value
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        raise _fail(where, tp, value)
    if tp is Path:
        if isinstance(value, str | os.PathLike):
            return Path(value)
        raise _fail(where, tp, value)
    if tp is _NONE_TYPE:
        if value is None:
            return None
        raise _fail(where, tp, value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _coerce_enum(value, tp, where)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _fail(where, tp, value)
    raise ConfigError(f"{where}: unsupported annotation {_type_name(tp)}")


def _coerce_union(value: Any, options: tuple[Any, ...], where: str, base: Any) -> Any:
    parsed = _unwrap(value)
    if parsed is None and _NONE_TYPE in options:
        return None
    members = [option for option in options if option is not _NONE_TYPE]
    for option in members:
        if _is_exact(parsed, option):
            return _coerce(value, option, where, base)
    # Text types last: with a raw override any value reads as a string.
    ordered = [m for m in members if m not in _TEXT_TYPES] + [m for m in members if m in _TEXT_TYPES]
    errors = []
    for option in ordered:
        try:
            return _coerce(value, option, where, base)
        except ConfigError as error:
            errors.append(error)
    if len(errors) == 1 and dataclasses.is_dataclass(ordered[0]):  # `Section | None`: the section's complaint
        raise errors[0]
    raise ConfigError(
        f"{where}: {parsed!r} does not fit any of {' | '.join(_type_name(option) for option in options)}"
    )


def _coerce_literal(value: Any, allowed: tuple[Any, ...], where: str) -> Any:
    candidates = [_unwrap(value)]
    if isinstance(value, _OverrideValue):
        candidates.append(value.raw.strip())
    for candidate in candidates:
        for option in allowed:
            if candidate == option and type(candidate) is type(option):
                return option
    shown = candidates[0]
    message = f"{where}: {shown!r} is not one of {', '.join(repr(option) for option in allowed)}"
    close = difflib.get_close_matches(str(shown), [str(option) for option in allowed], n=1, cutoff=0.6)
    if close:
        message += f"; did you mean {close[0]!r}?"
    raise ConfigError(message)


def _coerce_collection(value: Any, tp: Any, container: Any, where: str) -> Any:
    if not isinstance(value, list | tuple | set | frozenset):
        raise _fail(where, tp, value)
    args = get_args(tp)
    if container is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(args) != len(value):
            raise ConfigError(f"{where}: expected {len(args)} items for {_type_name(tp)}, got {len(value)}")
        return tuple(
            _coerce(item, item_tp, f"{where}[{i}]") for i, (item, item_tp) in enumerate(zip(value, args))
        )
    item_tp = args[0] if args else Any
    items = [_coerce(item, item_tp, f"{where}[{i}]") for i, item in enumerate(value)]
    if container is tuple:
        return tuple(items)
    if container in (set, frozenset):
        return container(items)
    return items


def _coerce_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise _fail(where, int, value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                number = float(value)
            except ValueError:
                number = None
            if number is not None and number.is_integer():
                return int(number)
    raise _fail(where, int, value)


def _coerce_float(value: Any, where: str) -> float:
    if isinstance(value, bool):
        raise _fail(where, float, value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        # PyYAML reads `5e-5` (no dot) as a string; accept any float literal.
        try:
            return float(value)
        except ValueError:
            pass
    raise _fail(where, float, value)


def _coerce_enum(value: Any, tp: type[enum.Enum], where: str) -> enum.Enum:
    if isinstance(value, tp):
        return value
    for member in tp:
        if value == member.value or value == member.name:
            return member
    choices = ", ".join(repr(member.value) for member in tp)
    raise ConfigError(f"{where}: {value!r} is not one of {choices}")


# ---------------------------------------------------------------------------
# plain data


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
    if isinstance(value, _OverrideValue):
        return _to_plain(value.parsed)
    if isinstance(value, enum.Enum):
        return _to_plain(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {
            k if isinstance(k, str | int | float | bool) else str(k): _to_plain(v) for k, v in value.items()
        }
    if isinstance(value, set | frozenset):
        items = [_to_plain(item) for item in value]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(value, list | tuple):
        return [_to_plain(item) for item in value]
    return value
