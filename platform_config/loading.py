"""Loading a config: the YAML file read strictly (only `true`/`false` are booleans, a duplicate key is an error),
`cdk synth -c key=value` overrides applied, pydantic's shape errors rewritten as `path: value — what is allowed`,
then every semantic rule. Either a valid `PlatformConfig` or one `ConfigError` with every problem."""

from __future__ import annotations

import re
from pathlib import Path
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ValidationError

from platform_config.errors import ConfigError
from platform_config.fields import did_you_mean
from platform_config.model import PlatformConfig
from platform_config.notices import unused_on_eks
from platform_config.rules import semantic_errors

DEFAULT_CONFIG_PATH = "config/default.yaml"


class StrictYamlLoader(yaml.SafeLoader):
    """SafeLoader that knows only `true`/`false` as booleans and rejects duplicate keys."""


if TYPE_CHECKING:
    _LibyamlSafeLoader = yaml.SafeLoader
else:  # libyaml's loader when PyYAML was built with it
    _LibyamlSafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class FastStrictYamlLoader(_LibyamlSafeLoader):
    """The same on libyaml's parser when PyYAML has it: a thousand users parse in 0.03 s instead of 0.2 s. Its errors
    do not quote the offending line, so a file it refuses is read again by `StrictYamlLoader` for the message."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict:
    keys = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in keys:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        keys.add(key)
    return loader.construct_mapping(node)


for _loader in (StrictYamlLoader, FastStrictYamlLoader):
    _loader.yaml_implicit_resolvers = {
        k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:bool"]
        for k, v in yaml.SafeLoader.yaml_implicit_resolvers.copy().items()
    }
    _loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|false)$"), list("tf"))
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _allowed_keys(loc: tuple) -> list[str]:
    """The field names of the model that holds the key at `loc` (walks lists and Optional[...])."""
    model: Any = PlatformConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        annotation = model.model_fields[part].annotation
        candidates = [annotation, *getattr(annotation, "__args__", ())]
        candidates += [a for c in candidates for a in getattr(c, "__args__", ())]
        model = next(c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel))
    return list(model.model_fields)


def format_pydantic_error(err: Mapping[str, Any]) -> str:
    loc = list(err["loc"])
    is_key = loc[-1:] == ["[key]"]  # a bad mapping key: report the mapping's path
    if is_key:
        loc = loc[:-2]
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if is_key:
        path += " key"
    kind, message, value = err["type"], err["msg"], err.get("input")
    if kind == "extra_forbidden":
        allowed = _allowed_keys(err["loc"])
        return f"{path}: unknown key;{did_you_mean(str(loc[-1]), allowed)} allowed here: {', '.join(allowed)}"
    if kind == "missing":
        return f"{path}: missing; this key is required"
    message = message.removeprefix("Value error, ")
    if kind.startswith("bool"):
        message = "must be true or false"
    return f"{path}: {value!r} — {message}"


def parse_config(data: Any, source: str = "<config>") -> PlatformConfig:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(source, [f"<root>: {type(data).__name__} — the configuration must be a mapping of keys"])
    try:
        cfg = PlatformConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(source, [format_pydantic_error(e) for e in exc.errors()]) from None
    errors = semantic_errors(cfg)
    if errors:
        raise ConfigError(source, errors)
    return cfg


class _Override:
    """One `-c key.path=value`: where it goes in the document (keys and list indexes), and how errors name it."""

    _PART = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[\d+\])*)")

    def __init__(self, key: str, raw: Any):
        self.key, self.raw = key, raw
        self.parts: list[str | int] = []
        for segment in key.split("."):
            match = self._PART.fullmatch(segment)
            if segment.isdigit():
                self.parts.append(int(segment))
            elif match:
                self.parts.append(match[1])
                self.parts += [int(i) for i in re.findall(r"\d+", match[2])]
            else:
                raise ConfigError(
                    "-c",
                    [
                        (
                            f"{key}: not a config key path (from -c {key}=...) — allowed: keys joined "
                            "by '.', list entries as [N], e.g. -c cluster.instance_groups[2]."
                            "instance_count=4"
                        )
                    ],
                )
        self.path = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(self.parts))

    def value(self) -> Any:
        """The value as YAML would read it in the file (`4` a number, `true` a boolean, `[a, b]` a list); a value
        YAML cannot read stays the string it is."""
        if not isinstance(self.raw, str):
            return self.raw
        try:
            return yaml.load(self.raw, Loader=StrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
        except yaml.YAMLError:
            return self.raw

    def apply(self, data: dict) -> None:
        node: Any = data
        for depth, (part, following) in enumerate(zip(self.parts, [*self.parts[1:], None], strict=True)):
            last = following is None
            if isinstance(part, int):
                if not isinstance(node, list) or part >= len(node):
                    have = f"{len(node)} entries" if isinstance(node, list) else "no list"
                    where = self.path[: self.path.rindex("[")] if "[" in self.path else self.path
                    raise ConfigError(
                        "-c",
                        [
                            (
                                f"{self.path}: {self.raw!r} (from -c {self.key}=...) — the config has "
                                f"{have} at {where}; an override can change an entry, not add one"
                            )
                        ],
                    )
            elif not isinstance(node, dict):
                raise ConfigError(
                    "-c",
                    [
                        (
                            f"{self.path}: {self.raw!r} (from -c {self.key}=...) — "
                            f"{'.'.join(map(str, self.parts[:depth])) or 'the config'} is not a mapping"
                        )
                    ],
                )
            if last:
                node[part] = self.value()
            else:
                if isinstance(part, str) and node.get(part) is None:
                    node[part] = [] if isinstance(following, int) else {}
                node = node[part]

    def names(self, error: str) -> bool:
        """Whether an error line is about this override's key or something under it."""
        path = error.split(":", 1)[0]
        return path == self.path or path.startswith((self.path + ".", self.path + "["))


# Context keys that are not config overrides: the app's own (`-c config=PATH`, the tests' chart stand-in) and the CDK's
# (`aws:cdk:...` set by the CLI, `@aws-cdk/...` feature flags from cdk.json).
APP_CONTEXT_KEYS = ("config", "allow_chart_stand_in")


def context_overrides(context: dict[str, Any]) -> dict[str, Any]:
    """The config overrides in a CDK app's context (`app.node.get_all_context()`): every `-c key=value` but the app's
    and the CDK's own keys."""
    return {
        key: value
        for key, value in context.items()
        if value is not None and key not in APP_CONTEXT_KEYS and not key.startswith("@") and ":" not in key
    }


def read_yaml(path: Path, text: str) -> Any:
    """The document in `text`, read strictly; a syntax error names the file and keeps YAML's lines (the snippet and
    the caret under the offending character)."""
    try:
        return yaml.load(text, Loader=FastStrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
    except yaml.YAMLError:
        try:
            return yaml.load(text, Loader=StrictYamlLoader)  # noqa: S506 - strict SafeLoader subclass
        except yaml.YAMLError as exc:
            for mark in (getattr(exc, "context_mark", None), getattr(exc, "problem_mark", None)):
                if mark is not None:  # a string's marks say "<unicode string>"; a stream's quote no line
                    mark.name = str(path)
            raise ConfigError(str(path), ["YAML: " + str(exc).replace("\n", "\n    ")]) from None


def load_config(
    path: str | Path = DEFAULT_CONFIG_PATH, overrides: dict[str, Any] | None = None, notices: list[str] | None = None
) -> PlatformConfig:
    """Read a YAML file, apply `-c key.path=value` overrides (which win over the file) and validate. An error caused by
    an override names it (`(from -c key=value)`). What the user should know but is no error (an empty file) is
    appended to `notices`."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(str(path), [f"config: {str(path)!r} — file not found"]) from None
    data = read_yaml(path, text)
    if data is None and notices is not None:
        notices.append(f"{path} holds no settings: every default is used (config/default.yaml spells them out)")
    data = dict(data or {}) if isinstance(data, dict) or data is None else data
    applied = [_Override(key, raw) for key, raw in (overrides or {}).items() if raw is not None]
    if isinstance(data, dict):
        for override in applied:
            override.apply(data)
    try:
        cfg = parse_config(data, str(path))
    except ConfigError as error:
        if not applied:
            raise
        named = []
        for line in error.errors:
            culprit = next((o for o in applied if o.names(line)), None)
            named.append(f"{line} (from -c {culprit.key}={culprit.raw})" if culprit else line)
        origin = f"{path} with -c " + ", ".join(f"{o.key}={o.raw}" for o in applied)
        raise ConfigError(origin, named) from None
    if notices is not None:
        notices += unused_on_eks(cfg)
    return cfg
