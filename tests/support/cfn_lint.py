"""cfn-lint in the test process. Its ~330 rules load once per process (~0.5 s of CPU a time, on top of ~1 s of
import that a `cfn-lint` process pays too), and every template is linted with them, as `cfn-lint a.json b.json`
lints each of its templates with one set of rules.

Pure functions that cfn-lint 1.58.0 calls again and again with the same arguments are memoized once the rules load
(`_same_with_less_work`; about a third of the CPU of linting this project's templates): the schema validator's class
is built once per set of keyword functions instead of once per call (`jsonschema.validators.create` ran
`dataclasses.dataclass` ~600 times per template), `dataclasses.fields` of a class is read once instead of on every
`evolve`, a FunctionFilter is evolved once per filter and flags, regex's module-level search/match/fullmatch/findall
answer a pattern and string once, a schema fragment is resolved once per document, a template's is_cdk_template()
and get_valid_getatts() once per template, the empty template a Validator gets by default once, and the MODULE
resources of a template's resources once. cfn-lint's own functions still do the work; only repeated calls with the
same arguments are answered from the first. Each returns what the original returns; `as_released()` lints with
cfn-lint's own code, and test_cfn_lint.py::test_cfn_lint_reports_the_same_findings_as_released compares the two on
planted findings (on the 246 templates of cfn-lint's own test fixtures at 217397c, 1,064 findings: the same, in the
same order, with PYTHONHASHSEED fixed, as cfn-lint prints sets)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import weakref
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

# The release whose code the replacements in _same_with_less_work were read from (requirements-dev.txt pins it).
CHECKED_RELEASE = "1.58.0"
_released: list[tuple[Any, str, Any]] = []  # (owner, attribute, cfn-lint's own value) of each replaced attribute


@cache
def _rules() -> Any:
    import cfnlint.runner
    from cfnlint.config import ConfigMixIn

    rules = cfnlint.runner.Runner(ConfigMixIn([])).rules
    _same_with_less_work()
    return rules


def lint(paths: Iterable[Path], *options: str) -> dict[Path, list[str]]:
    """cfn-lint's findings on each template (its errors and warnings, as `cfn-lint [options] path...` reports them
    and exits non-zero for), by path."""
    from cfnlint.config import ConfigMixIn
    from cfnlint.runner.template.runner import run_template_by_file_paths

    paths = list(paths)
    found: dict[str, list[str]] = {}
    for match in run_template_by_file_paths(ConfigMixIn([*options, "--template", *map(str, paths)]), _rules()):
        found.setdefault(match.filename, []).append(str(match))
    return {path: found.get(str(path), []) for path in paths}


@contextlib.contextmanager
def as_released() -> Iterator[None]:
    """Lint with cfn-lint's own code inside the block (the replacements of _same_with_less_work put back after)."""
    _rules()
    replaced = [(owner, name, getattr(owner, name)) for owner, name, _ in _released]
    for owner, name, value in _released:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in replaced:
            setattr(owner, name, value)


def _replace(owner: Any, name: str, value: Any) -> None:
    _released.append((owner, name, getattr(owner, name)))
    setattr(owner, name, value)


def _same_with_less_work() -> None:
    import cfnlint.context.context
    import cfnlint.jsonschema._filter
    import cfnlint.jsonschema.validators
    import cfnlint.schema.resolver._resolver
    import cfnlint.template.template
    import regex
    from cfnlint.version import __version__

    if __version__ != CHECKED_RELEASE:
        raise RuntimeError(
            f"cfn-lint {__version__} is installed; tests/support/cfn_lint.py memoizes functions of cfn-lint "
            f"{CHECKED_RELEASE}: check, for the new release, what each comment in _same_with_less_work says makes "
            f"its function's answer depend on its arguments alone (jsonschema.validators.create, the `fields` "
            f"calls, FunctionFilter.evolve, validators.Template, regex's module functions, "
            f"RefResolver.resolve_fragment, Template.is_cdk_template and get_valid_getatts, Context.module_names), "
            f"run test_cfn_lint_reports_the_same_findings_as_released, then set CHECKED_RELEASE"
        )

    # A dataclass's fields are fixed when its class is made: read them once per class. The three modules call
    # `fields(cls)` on every evolve and descend (~150,000 times for four templates).
    fields = cache(dataclasses.fields)
    for module in (cfnlint.context.context, cfnlint.jsonschema.validators, cfnlint.jsonschema._filter):
        _replace(module, "fields", fields)

    # create() makes a new Validator dataclass whose defaults are its three arguments; Validator.extend calls it
    # for every resource and rule. One class per distinct set of arguments (nothing mutates them or a
    # FunctionFilter once made; two equal FunctionFilters behave the same).
    create, classes = cfnlint.jsonschema.validators.create, {}

    def frozen(function_filter: Any) -> Any:
        if function_filter is None:
            return None
        values = ((f.name, getattr(function_filter, f.name)) for f in dataclasses.fields(function_filter))
        return type(function_filter), *((name, tuple(v) if isinstance(v, list) else v) for name, v in values)

    def create_once(validators=None, function_filter=None, fn_resolvers=None):
        key = (tuple((validators or {}).items()), frozen(function_filter), tuple((fn_resolvers or {}).items()))
        if key not in classes:
            classes[key] = create(validators=validators, function_filter=function_filter, fn_resolvers=fn_resolvers)
        return classes[key]

    _replace(cfnlint.jsonschema.validators, "create", create_once)

    # FunctionFilter.evolve(**flags) makes a new FunctionFilter with the given flags and the rest of its own; the
    # keywords (if, allOf, ...) and rules (CfnLint, Configuration, BaseFn) call it at nearly every step, with a
    # handful of distinct filters and flags (~1.4 % of the lint's samples). One filter per filter and flags
    # (by identity: the memo holds the filter); as create_once above, it relies on nothing mutating a FunctionFilter
    # once made.
    function_filter = cfnlint.jsonschema._filter.FunctionFilter
    evolve_filter, filters = function_filter.evolve, {}

    def evolve_filter_once(self, **kwargs):
        flags = tuple(sorted(kwargs.items()))
        try:
            hash(flags)
        except TypeError:  # a flag that is not hashable
            return evolve_filter(self, **kwargs)
        return _held(filters, self, flags, lambda: evolve_filter(self, **kwargs))

    _replace(function_filter, "evolve", evolve_filter_once)

    # A Validator made without a template gets `Template(None, {})` (the default factory of its `cfn` field, which
    # looks `Template` up in cfnlint.jsonschema.validators when called): BaseJsonSchema.extend_validator makes one
    # for every rule and function it extends (3,284 for three variants, ~0.14 ms each: a context, a graph and five
    # key searches of the empty template) and replaces it at once with the linted template. The template of those
    # arguments is always the same, and only read: nothing assigns to a Template but the runner's transform step,
    # which runs on the linted template alone, and nothing compares Templates by identity. Made once; any other
    # call goes to Template itself.
    template_class, empty_template = cfnlint.jsonschema.validators.Template, []

    def template_once(*args, **kwargs):
        if args != (None, {}) or kwargs:
            return template_class(*args, **kwargs)
        if not empty_template:
            empty_template.append(template_class(None, {}))
        return empty_template[0]

    _replace(cfnlint.jsonschema.validators, "Template", template_once)

    # regex's module-level search, match, fullmatch and findall look their pattern up in regex's cache of compiled
    # patterns on every call (~69,000 calls for three variants, 93 % with a pattern and string seen before: a
    # patternProperties key, a GetAtt attribute name, an IAM action). Each result is a function of the pattern and
    # the string's characters: a repeated call gets the first call's answer (findall a fresh copy of its list; a
    # match object is only read: cfn-lint never detaches or mutates one). Calls with flags or other options, and
    # arguments that are not a str or a compiled pattern and a str, go to regex itself.
    for name in ("search", "match", "fullmatch", "findall"):
        _replace(regex, name, _first_answer_by_value(getattr(regex, name), copy=name == "findall"))

    # resolve_fragment(document, fragment) walks a schema document to a $ref's fragment (a breadth-first search for
    # "id" and "$id" first); it reads nothing of the resolver it is a method of, and every validator gets a new
    # resolver (RefResolver.from_schema), so its per-resolver cache starts empty each time. Answered once per
    # document (by identity: the memo holds the document, so its id is not reused) and fragment. Schema documents
    # are not changed in the keys it follows while a template is linted; an error (RefResolutionError) is raised
    # again by the next call, never remembered.
    resolver = cfnlint.schema.resolver._resolver.RefResolver
    resolve_fragment, fragments = resolver.resolve_fragment, {}

    def resolve_fragment_once(self, document, fragment):
        return _held(fragments, document, (fragment,), lambda: resolve_fragment(self, document, fragment))

    _replace(resolver, "resolve_fragment", resolve_fragment_once)

    # A Template's is_cdk_template() reads its template's resources and get_valid_getatts() its regions and its
    # context's resources, neither changed once rules run (a transform replaces the template and its context whole,
    # which is a new input here). Rules ask once per Fn::Join (SubNotJoin) and once per Fn::GetAtt (GetAtt): each
    # answered once per template. The GetAtts object is only read (its `match`).
    template = cfnlint.template.template.Template
    _replace(template, "is_cdk_template", _once_per_inputs(template.is_cdk_template, lambda t: (t.template,)))
    _replace(
        template,
        "get_valid_getatts",
        _once_per_inputs(template.get_valid_getatts, lambda t: (t.regions, t.context.resources)),
    )

    # Context.module_names is a cached_property of each Context, and a validator descends with a new Context at
    # every step, so the logical ids of the MODULE resources were found again, over every resource, for each Ref
    # and GetAtt. They are a function of the context's resources (the template's, shared by every Context evolved
    # from its first, and never changed): found once per resources mapping (by identity: the memo holds it). A
    # cfnContext step whose references leave out resources evolves with a new empty mapping each time: hence the
    # bound.
    context = cfnlint.context.context.Context
    module_names, by_resources = context.module_names.func, {}

    def module_names_once(self):
        return _held(by_resources, self.resources, (), lambda: module_names(self), bound=256)

    cached = functools.cached_property(module_names_once)
    cached.__set_name__(context, "module_names")
    _replace(context, "module_names", cached)


def _held(memo: dict, obj: Any, key: tuple, compute: Callable[[], Any], *, bound: int | None = None) -> Any:
    """compute()'s answer once per `obj`, by identity, and `key`: the memo holds `obj` beside the answer, so its id is
    not reused by another object while the answer is kept. With `bound`, the memo starts over past that many."""
    full_key = (id(obj), *key)
    hit = memo.get(full_key)
    if hit is None or hit[0] is not obj:
        if bound is not None and len(memo) > bound:
            memo.clear()
        hit = memo[full_key] = (obj, compute())
    return hit[1]


def _first_answer_by_value(function: Callable, *, copy: bool) -> Callable:
    """`function(pattern, string)` answered once per distinct (pattern, string) when called with just those: a str
    or compiled regex pattern and a str; any other call goes to `function`."""
    import regex

    once = functools.lru_cache(maxsize=1 << 16)(function)

    def first_answer(pattern, string, *args, **kwargs):
        if args or kwargs or not isinstance(string, str) or not isinstance(pattern, (str, regex.Pattern)):
            return function(pattern, string, *args, **kwargs)
        return list(once(pattern, string)) if copy else once(pattern, string)

    return first_answer


def _once_per_inputs(method: Callable, inputs: Callable[[Any], tuple]) -> Callable:
    """`method(self)` answered once per object for as long as the objects `inputs(self)` names (all it reads) are
    the same ones."""
    memo: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def once(self):
        read = inputs(self)
        hit = memo.get(self)
        if hit is None or any(a is not b for a, b in zip(hit[0], read)):
            hit = memo[self] = (read, method(self))
        return hit[1]

    return once
