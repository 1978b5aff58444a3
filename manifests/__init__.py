"""What the platform hands to Kubernetes rather than CloudFormation, as plain data built from typed inputs: the
objects the EKS stacks apply, the HyperPod dependency chart's values, and training job manifests. Nothing here
imports CDK; stacks pass the results to constructs."""
