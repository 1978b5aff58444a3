"""What the API server does with a ValidatingAdmissionPolicy and its binding for one request, written out for tests:
resource and operation match, the binding's namespace selector (the namespace's `kubernetes.io/metadata.name`
label), the params ConfigMap of the request's namespace (paramRef without a namespace), parameterNotFoundAction,
the policy's variables and validations evaluated with cel-expr-python (the CEL C++ implementation: like cel-go in the
API server, selecting a field that is not there is an error, not false), and failurePolicy Fail turning an
evaluation error into a refusal. Kubernetes' own CEL libraries (lists, regex, quantity, authorizer) are not here;
the policies under test use none of them."""
from __future__ import annotations

from typing import Any, Mapping

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

ENV = cel.NewEnv(variables={"object": cel.Type.DYN, "params": cel.Type.DYN, "variables": cel.Type.DYN},
                 extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional()])
NO_PARAMS = "no parameters: the namespace's ConfigMap is missing (parameterNotFoundAction Deny)"


def _selected(namespace: str, selector: dict) -> bool:
    labels = {"kubernetes.io/metadata.name": namespace}
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In", f"this evaluator knows only In: {expr}"
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admit(obj: dict, *, namespace: str, policy: dict, binding: dict, params: Mapping[str, dict],
          resource: str = "pods", operation: str = "CREATE") -> list[str]:
    """The messages of the validations that refuse `obj` (empty: admitted). `params`: namespace -> its ConfigMaps."""
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    if not any(resource in r["resources"] and operation in r["operations"] for r in rules):
        return []
    if not _selected(namespace, binding["spec"]["matchResources"]["namespaceSelector"]):
        return []
    ref = binding["spec"]["paramRef"]
    assert "namespace" not in ref and policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
    config_map = params.get(namespace)
    if config_map is None or config_map["metadata"]["name"] != ref["name"]:
        assert ref["parameterNotFoundAction"] == "Deny"
        return [NO_PARAMS]
    data: dict[str, Any] = {"object": obj, "params": config_map}
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables", []):
        value = ENV.compile(variable["expression"]).eval(data={**data, "variables": variables})
        assert value.type() == cel.Type.BOOL, (variable, value.value())
        variables[variable["name"]] = value.value()
    refused = []
    for validation in policy["spec"]["validations"]:
        result = ENV.compile(validation["expression"]).eval(data={**data, "variables": variables})
        if result.type() != cel.Type.BOOL:  # an evaluation error
            assert policy["spec"]["failurePolicy"] == "Fail"
            refused.append(f"error: {result.value()}")
        elif not result.value():
            refused.append(validation["message"])
    return refused
