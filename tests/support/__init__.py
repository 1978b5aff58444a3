"""Helpers shared by the tests, one module a job (pytest.ini puts tests/ on the path: `from support.x import y`).

- paths: the repository root and the PATH app.py runs with in a subprocess.
- variants: the config variants the suite synthesizes and the configs built from the examples.
- template: queries of a synthesized template (resources of a type, the only one, Kubernetes manifests).
- intrinsics: a CloudFormation value with Fn::Join (and Ref, Fn::GetAtt, Fn::Select) as text.
- iam: the statements of a role; iam_facts: statements checked against the Service Authorization Reference.
- cfn_events: the events CloudFormation and the custom-resource Provider framework send a handler.
- moto: a moto server on loopback, its reset and clients; moto_cloudformation: the server with CloudFormation's
  change-set behaviours moto lacks.
- ports: a free loopback port.
- data: a nested value set by its dotted path.
- modules: a module loaded from a file that is not on the path.
- process_tree: the processes under a process; admission: a ValidatingAdmissionPolicy evaluated as the API server
  does.

Fixtures stay in conftest.py; a test imports helpers from here, never from conftest.
"""
