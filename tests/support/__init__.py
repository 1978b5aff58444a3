"""Helpers shared by the tests, one module a job (pytest.ini puts tests/ on the path: `from support.x import y`).

- paths: the repository root, the PATH app.py runs with in a subprocess, a directory in memory for many files.
- variants: the config variants the suite synthesizes and the configs built from the examples; synthesis: each
  variant synthesized once per run and shared by the xdist workers; scheduling: how the work is shared over them.
- template: queries of a synthesized template (resources of a type, their properties, the only one, the HyperPod
  cluster's properties, every resource of a variant, Kubernetes manifests and patches).
- intrinsics: a CloudFormation value with Fn::Join (and Ref, Fn::GetAtt, Fn::Select) as text.
- iam: the statements of a role, by Sid, of resource policies; iam_facts: statements checked against the Service
  Authorization Reference.
- events: the events a handler receives (custom-resource requests, is_complete, CloudTrail via EventBridge).
- moto_server: a moto server on loopback, its reset, clients, sessions sharing one botocore loader and environments;
  moto_cloudformation: the server it runs, with CloudFormation's change-set behaviours moto lacks, over moto_lean:
  moto's server without three of its costs that change no answer; destroy_harness and preflight_harness: the AWS that
  cli/destroy.py's and cli/preflight.py's tests run against.
- recording: what a handler test injects to see calls and sleeps; raw_answers: an HTTP answer injected at a real
  client's before-send, below botocore's parsing and retries.
- ports: a free loopback port; tls_certificates: a self-signed certificate for a TLS stand-in on loopback.
- data: a nested value set by its dotted path; configs: a small config, one key changed, its errors, the rules a
  table of refused configs reaches; job_files: a job file, one key changed.
- docs: the figures docs/testing.md states, for the module that owns each table to check.
- modules: a module loaded from a file that is not on the path.
- cli_main: a cli/ command's main() run in the test's process, its exit status and output as a process's.
- app_main: app.py run in the test's process as the CDK CLI runs it, its exit status and output.
- job_crd: the HyperPodPyTorchJob CRD as the API server applies it; teams: two EKS teams for the admission tests;
  admission: a ValidatingAdmissionPolicy evaluated as the API server does.
- process_tree: the processes under a process; warm_python: a `python` whose processes fork from one that imported
  torch and MLflow once; socket_calls: how a command hands its call (request and standard streams) to such a warm
  server, tests/e2e/aws_shim.py's too.
- day2_matrix: the day-2 change matrix (base configs, routine and never-in-place changes) and its cached synthesis.
- price_list_answers: GetProducts answers for the price table's tests.
- task_governance: the CloudFormation requests and SageMaker answers of the task-governance handler's tests.
- profile_answers: the profile-events handler's settings, event and Stubber answers (SageMaker profiles, FSx tasks).
- studio_bundles: the Studio tools bundle as built, its pins, and a small bundle and zip laid out like it.

Fixtures stay in conftest.py; a test imports helpers from here, never from conftest or from another test module.
"""
