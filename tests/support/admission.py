"""What the API server does with a ValidatingAdmissionPolicy and its binding for one request, written out for tests:
resource (API group and resource) and operation match, the binding's namespace selector (the namespace's
`kubernetes.io/metadata.name` label), the policy's matchConditions, the params ConfigMap of the request's namespace
(paramRef without a namespace), parameterNotFoundAction, the policy's variables and validations evaluated with
cel-expr-python (the CEL C++ implementation: like cel-go in the API server, selecting a field that is not there is an
error, not false), messageExpression, and failurePolicy Fail turning an evaluation error into a refusal. `object`
is null on DELETE and `oldObject` on CREATE, as in the API server; `request.userInfo` carries the requester. The
messages come back in the policy's order; the API server answers a denied request with the first one.
Kubernetes' own CEL libraries (lists, regex, quantity, authorizer) are not here; the policies under test use none of
them (the strings extension, which Kubernetes includes, is)."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from cel_expr_python import cel
from cel_expr_python.ext import ext_optional, ext_strings

ENV = cel.NewEnv(
    variables={
        "object": cel.Type.DYN,
        "oldObject": cel.Type.DYN,
        "params": cel.Type.DYN,
        "variables": cel.Type.DYN,
        "request": cel.Type.DYN,
    },
    extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional()],
)
NO_PARAMS = "no parameters: the namespace's ConfigMap is missing (parameterNotFoundAction Deny)"
# The training operator's service account (aws-hyperpod/hp-training-operator-controller-manager): no team group.
OPERATOR = {
    "username": "system:serviceaccount:aws-hyperpod:hp-training-operator-controller-manager",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:aws-hyperpod", "system:authenticated"],
}


def _selected(namespace: str, selector: dict) -> bool:
    labels = {"kubernetes.io/metadata.name": namespace}
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In", f"this evaluator knows only In: {expr}"
        if labels.get(expr["key"]) not in expr["values"]:
            return False
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _eval(expression: str, data: dict) -> Any:
    return ENV.compile(expression).eval(data=data)


def admit(
    obj: Optional[dict],
    *,
    namespace: str,
    policy: dict,
    binding: dict,
    params: Mapping[str, dict],
    resource: str = "pods",
    operation: str = "CREATE",
    api_group: str = "",
    user: Optional[dict] = None,
    old: Optional[dict] = None,
) -> list[str]:
    """The messages of the validations that refuse the request (empty: admitted). `params`: namespace -> its
    ConfigMap; `user`: the requester's userInfo (username, groups); `old`: the object before an UPDATE or DELETE."""
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    if not any(
        resource in r["resources"] and operation in r["operations"] and api_group in r["apiGroups"] for r in rules
    ):
        return []
    if not _selected(namespace, binding["spec"]["matchResources"]["namespaceSelector"]):
        return []
    request = {
        "operation": operation,
        "namespace": namespace,
        "userInfo": user or {"username": "kubernetes-admin", "groups": ["system:authenticated"]},
    }
    data: dict[str, Any] = {"object": obj, "oldObject": old, "request": request, "params": None, "variables": {}}
    for condition in policy["spec"].get("matchConditions", []):
        result = _eval(condition["expression"], data)
        assert result.type() == cel.Type.BOOL, (condition, result.value())
        if not result.value():
            return []
    ref = binding["spec"].get("paramRef")
    if "paramKind" in policy["spec"]:
        assert "namespace" not in ref and policy["spec"]["paramKind"] == {"apiVersion": "v1", "kind": "ConfigMap"}
        config_map = params.get(namespace)
        if config_map is None or config_map["metadata"]["name"] != ref["name"]:
            assert ref["parameterNotFoundAction"] == "Deny"
            return [NO_PARAMS]
        data["params"] = config_map
    else:
        assert ref is None
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables", []):
        value = _eval(variable["expression"], {**data, "variables": variables})
        assert value.type() != cel.Type.ERROR, (variable, value.value())
        variables[variable["name"]] = value.plain_value()
    data["variables"] = variables
    refused = []
    for validation in policy["spec"]["validations"]:
        result = _eval(validation["expression"], data)
        if result.type() != cel.Type.BOOL:  # an evaluation error
            assert policy["spec"]["failurePolicy"] == "Fail"
            refused.append(f"error: {result.value()}")
        elif not result.value():
            message = validation.get("message", "")
            if "messageExpression" in validation:
                rendered = _eval(validation["messageExpression"], data)
                if rendered.type() == cel.Type.STRING:  # otherwise the API server falls back to `message`
                    message = rendered.value()
            refused.append(message)
    return refused
