"""The TCP ports Lustre (LNet) uses between clients and the file system's servers, in both directions, as (first,
last) ranges: FSx for Lustre User Guide, "File system access control with Amazon VPC"
(https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html). Plain data, no CDK: the
security groups and `make preflight` (cli/preflight.py, network ACLs) both read it."""

LUSTRE_PORTS = ((988, 988), (1018, 1023))
