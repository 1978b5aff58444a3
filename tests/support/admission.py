"""What the API server does with a ValidatingAdmissionPolicy and its binding for one request, written out for tests:
the checks it makes when the policy is created (failurePolicy and each validation's reason among the values it
supports), resource (API group, version and resource, the request's as its object's apiVersion states them) and
operation match, the binding's namespace selector (the namespace's
`kubernetes.io/metadata.name` label), the policy's matchConditions, the params ConfigMap of the request's namespace
(paramRef without a namespace), parameterNotFoundAction, the policy's variables and validations evaluated with
cel-expr-python (the CEL C++ implementation: like cel-go in the API server, selecting a field that is not there is an
error, not false), messageExpression, and failurePolicy turning an evaluation error into a refusal (Fail) or
nothing (Ignore). `object`
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


# What the API server accepts in a policy it is asked to create (kubernetes/kubernetes@afd5df58
# pkg/apis/admissionregistration/validation/validation.go: supportedFailurePolicies, supportedValidationPolicyReason);
# any other value and the policy is refused, so it never guards anything.
FAILURE_POLICIES = {"Fail", "Ignore"}
VALIDATION_REASONS = {"Forbidden", "Invalid", "RequestEntityTooLarge"}


def check_policy(policy: dict) -> None:
    """Raise as the API server refuses to create `policy` when a field it checks holds a value it does not support."""
    spec = policy["spec"]
    assert spec.get("failurePolicy") in FAILURE_POLICIES, (
        f"spec.failurePolicy: Unsupported value: {spec.get('failurePolicy')!r}"
    )
    for i, validation in enumerate(spec["validations"]):
        reason = validation.get("reason", "Invalid")
        assert reason in VALIDATION_REASONS, f"spec.validations[{i}].reason: Unsupported value: {reason!r}"


def _request_kind(obj: Optional[dict], old: Optional[dict]) -> tuple[str, str]:
    """(API group, version) of the request: its object's apiVersion (the old object's on DELETE)."""
    group, _, version = (obj if obj is not None else old or {})["apiVersion"].rpartition("/")
    return group, version


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
    user: Optional[dict] = None,
    old: Optional[dict] = None,
) -> list[str]:
    """The messages of the validations that refuse the request (empty: admitted). `params`: namespace -> its
    ConfigMap; `user`: the requester's userInfo (username, groups); `old`: the object before an UPDATE or DELETE.
    A version matches when the rule lists it (the API server's matchPolicy Equivalent would also convert a request
    made through another served version of the resource; these requests come at the version their object states)."""
    check_policy(policy)
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    group, version = _request_kind(obj, old)
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    if not any(
        resource in r["resources"]
        and operation in r["operations"]
        and group in r["apiGroups"]
        and version in r["apiVersions"]
        for r in rules
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
            if policy["spec"]["failurePolicy"] == "Fail":
                refused.append(f"error: {result.value()}")
        elif not result.value():
            message = validation.get("message", "")
            if "messageExpression" in validation:
                rendered = _eval(validation["messageExpression"], data)
                if rendered.type() == cel.Type.STRING:  # otherwise the API server falls back to `message`
                    message = rendered.value()
            refused.append(message)
    return refused
